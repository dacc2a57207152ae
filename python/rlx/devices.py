"""Devices: what the library was built with and what can run here."""

import collections
import ctypes

from . import _capi
from .errors import check

lib = _capi.lib

Device = collections.namedtuple("Device", "name available detail")
Device.__doc__ = """A backend: name ("cpu", "cuda", "vulkan", "webgpu"), available (bool) and
detail ("available: ..." or "not built" or "unavailable: <reason>")."""


def devices():
    """Every backend rlx knows, available or not, with the reason."""
    out = []
    for i in range(lib.rlx_device_count()):
        info = _capi.DeviceInfo()
        check(lib.rlx_device_get(i, ctypes.byref(info)), f"rlx_device_get({i}) failed")
        out.append(Device(_capi.text(info.name), bool(info.available), _capi.text(info.detail)))
    return out


def device(name):
    """The Device called name; NotFoundError for an unknown name."""
    for d in devices():
        if d.name == name:
            return d
    from .errors import NotFoundError
    raise NotFoundError(f"unknown device '{name}' (known: "
                        + ", ".join(d.name for d in devices()) + ")")


def is_available(name):
    """(available, detail) for device `name`."""
    d = device(name)
    return d.available, d.detail


def resolve_device(name="best"):
    """The device name `name` stands for ("best": first available of cuda, vulkan, webgpu,
    cpu)."""
    out = ctypes.c_char_p()
    status = lib.rlx_device_resolve(name.encode(), ctypes.byref(out))
    check(status, f"cannot resolve device '{name}'")
    return _capi.text(out.value)

"""Shared fixtures: the devices to run on (absent ones skip with the library's reason)."""

import numpy as np
import pytest

import rlx

DEVICES = ["cpu", "cuda", "vulkan", "webgpu"]


def require_device(name):
    available, detail = rlx.is_available(name)
    if not available:
        pytest.skip(f"{name}: {detail}")
    return name


@pytest.fixture(params=DEVICES)
def device(request):
    """Each device rlx can run here; the rest SKIP with the reason rlx gives."""
    return require_device(request.param)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def run_graph(build, inputs, device="cpu", params=None, **options):
    """Builds a graph with build(g, *input_tensors) -> output tensor(s), compiles it on
    device and runs it on the numpy `inputs` (a dict name -> array, in order)."""
    with rlx.Graph() as g:
        tensors = [g.input(name, arr.dtype, arr.shape) for name, arr in inputs.items()]
        outs = build(g, *tensors)
        g.set_outputs(outs if isinstance(outs, (list, tuple)) else [outs])
        exe = g.compile(device, **options)
    with exe:
        if params:
            exe.set_params(params)
        return exe.run(inputs)

"""Training: rlx.Trainer (an rlx_trainer).

    with rlx.Graph() as g:
        x, y = g.input("x", "f32", [16, 2]), g.input("y", "f32", [16, 1])
        w, b = g.param("w", "f32", [2, 1]), g.param("b", "f32", [1])
        d = x @ w + b - y
        loss = (d * d).mean()
        trainer = rlx.Trainer(g, loss, "cpu", optimizer="sgd", lr=0.1)
    trainer.set_params(w=np.zeros((2, 1), np.float32), b=np.zeros(1, np.float32))
    for _ in range(100):
        loss_value = trainer.step(x=xs, y=ys)
    w_now = trainer.read_param("w")

One compiled step runs forward, backward and the optimizer update; params
and optimizer state stay on the device between steps.
"""

import ctypes
import types

import numpy as np

from . import _capi
from .dtypes import to_dtype
from .errors import check
from .executable import _array, _cstrings, _needs_info, _options
from .graph import Graph

lib = _capi.lib

# rlx_optimizer by name
_OPTIMIZERS = {"sgd": 0, "adam": 1, "adamw": 2}


def _train_options(optimizer, lr, momentum, dampening, nesterov, weight_decay, betas, eps,
                   clip_norm, accumulate, loss_scale, dynamic_loss_scale, frozen, keep_grads):
    """An rlx_train_options (PyTorch's defaults where None) and the buffers it points into."""
    if optimizer not in _OPTIMIZERS:
        raise ValueError("optimizer must be 'sgd', 'adam' or 'adamw', not %r" % (optimizer,))
    o = _capi.TrainOptions()
    lib.rlx_train_options_init(ctypes.byref(o), _OPTIMIZERS[optimizer])
    if lr is not None:
        o.lr = lr
    o.sgd.momentum, o.sgd.dampening, o.sgd.nesterov = momentum, dampening, int(nesterov)
    if weight_decay is not None:
        o.sgd.weight_decay = o.adam.weight_decay = weight_decay
    o.adam.beta1, o.adam.beta2 = betas
    o.adam.eps = eps
    o.clip_norm, o.accumulate = clip_norm, accumulate
    o.loss_scale, o.dynamic_loss_scale = loss_scale, int(dynamic_loss_scale)
    o.keep_grads = int(keep_grads)
    keep = []
    frozen = list(frozen or ())
    if frozen:
        names, arr = _cstrings(frozen)
        o.frozen, o.n_frozen = names, len(frozen)
        keep.append(arr)
    return o, keep


class Trainer(_capi.Owned):
    """A compiled training step of `loss` (a scalar float Tensor of `graph`) on `device`.

    optimizer: 'sgd', 'adam' or 'adamw' with PyTorch's defaults (lr 1e-2 for SGD, else
    1e-3; betas (0.9, 0.999), eps 1e-8; weight decay 0, AdamW 0.01). momentum,
    dampening, nesterov: SGD's. clip_norm > 0 scales the gradients to that global L2
    norm. accumulate: micro-steps per update (gradients averaged). loss_scale /
    dynamic_loss_scale: f16 loss scaling. frozen: names of params not trained.
    keep_grads: gradients readable with read_grad. precision ('bf16' / 'f16') computes
    forward and backward in that dtype with f32 master weights; the other keyword
    arguments are rlx.compile's. Every float param not frozen is trained.
    Errors raise the status's RlxError with the library's message."""

    _destroy = lib.rlx_trainer_destroy
    _kind = "trainer"

    def __init__(self, graph, loss, device="cpu", *, optimizer="adamw", lr=None, momentum=0.0,
                 dampening=0.0, nesterov=False, weight_decay=None, betas=(0.9, 0.999),
                 eps=1e-8, clip_norm=0.0, accumulate=1, loss_scale=0.0,
                 dynamic_loss_scale=False, frozen=(), keep_grads=False, precision=None,
                 strict=False, allow_tf32=False, threads=None, use_blas=None, reference=False,
                 debug_nans=False):
        self._h = None
        if not isinstance(graph, Graph):
            raise TypeError("Trainer() takes an rlx.Graph")
        topt, keep_t = _train_options(optimizer, lr, momentum, dampening, nesterov,
                                      weight_decay, betas, eps, clip_norm, accumulate,
                                      loss_scale, dynamic_loss_scale, frozen, keep_grads)
        copt, keep_c = _options(graph, strict, allow_tf32, threads, use_blas, reference,
                                debug_nans, None, None, None, precision)
        handle = ctypes.c_void_p()
        status = lib.rlx_train_compile(graph.handle, graph._t(loss), device.encode(),
                                       ctypes.byref(copt), ctypes.byref(topt),
                                       ctypes.byref(handle))
        del keep_t, keep_c
        graph._check(status)
        self._h = handle.value
        self.device = device
        self.optimizer = optimizer
        # name -> (DType, shape) of every param (the trainer reads and writes them)
        self._params = {p.name: (p.dtype, p.shape) for p in graph.params}
        self._inputs = {i.name: i for i in graph.inputs}

    def _check(self, status):
        check(status, lambda: _capi.text(lib.rlx_trainer_last_error(self._h)))

    # ---- params
    @property
    def param_names(self):
        return list(self._params)

    def _param(self, name):
        if name not in self._params:
            # the library names the problem
            self._check(lib.rlx_trainer_read_param(self.handle, name.encode(), 0, None, 0))
        return self._params[name]

    def set_param(self, name, value):
        """Sets a param (trained or frozen) from an array of its dtype (or f32)."""
        dtype, _ = self._param(name)
        arr, src = _array(value, types.SimpleNamespace(dtype=dtype))
        self._check(lib.rlx_trainer_set_param(self.handle, name.encode(), src,
                                              arr.ctypes.data, arr.nbytes))

    def set_params(self, params=None, **kwargs):
        for name, value in dict(params or {}, **kwargs).items():
            self.set_param(name, value)

    def _read(self, fn, name, dtype):
        own, shape = self._param(name)
        dtype = own if dtype is None else to_dtype(dtype)
        out = np.empty(shape, dtype.numpy)
        self._check(fn(self.handle, name.encode(), dtype, out.ctypes.data, out.nbytes))
        return out

    def read_param(self, name, dtype=None):
        """The param's value after the last step (dtype: a float conversion, e.g. 'f32')."""
        return self._read(lib.rlx_trainer_read_param, name, dtype)

    def read_grad(self, name, dtype=None):
        """With keep_grads: the gradient of a trained param from the last step (unscaled,
        before clipping, summed over an accumulation's micro-steps)."""
        return self._read(lib.rlx_trainer_read_grad, name, dtype)

    @property
    def params(self):
        """{name: array} of every param's current value."""
        return {name: self.read_param(name) for name in self._params}

    # ---- steps
    def set_input(self, name, value):
        """Copies an array in as batch input `name` (the input's dtype)."""
        info = self._inputs.get(name) if _needs_info(value) else None
        arr, dtype = _array(value, info)
        self._check(lib.rlx_trainer_set_input(self.handle, name.encode(), dtype,
                                              _capi.dims(arr.shape), arr.ndim,
                                              arr.ctypes.data, arr.nbytes))

    def set_inputs(self, inputs=None, **kwargs):
        for name, value in dict(inputs or {}, **kwargs).items():
            self.set_input(name, value)

    def set_lr(self, lr):
        """Learning rate of the next steps."""
        self._check(lib.rlx_trainer_set_lr(self.handle, lr))

    def step(self, inputs=None, **kwargs):
        """Sets the given inputs, runs one step (forward, backward, and the update on every
        accumulate-th call) and returns the loss of its forward pass."""
        self.set_inputs(inputs, **kwargs)
        loss = ctypes.c_float()
        self._check(lib.rlx_trainer_step(self.handle, ctypes.byref(loss)))
        return float(loss.value)

    @property
    def step_count(self):
        """Updates made so far."""
        return int(lib.rlx_trainer_step_count(self.handle))

    # ---- checkpoints
    def save(self, directory):
        """Writes params, optimizer state and the step count into `directory`."""
        self._check(lib.rlx_trainer_save(self.handle, str(directory).encode()))

    def load(self, directory):
        """Restores what save wrote (a trainer of the same graph and options)."""
        self._check(lib.rlx_trainer_load(self.handle, str(directory).encode()))

    def report(self):
        """The dispatch report of the executable that runs the step."""
        out = ctypes.c_void_p()
        exe = lib.rlx_trainer_exec(self.handle)
        check(lib.rlx_exec_report(exe, ctypes.byref(out)),
              lambda: _capi.text(lib.rlx_exec_last_error(exe)))
        return _capi.take_string(out.value)

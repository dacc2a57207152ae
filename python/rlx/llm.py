"""LLMs from real files (rlx_llm_*) and tokenizers from a GGUF vocab (rlx_tokenizer_*).

    m = rlx.load_llm("model.gguf")            # or an HF folder: config.json + safetensors
    exe = m.compile("cpu")                    # params set from the file
    ids = np.array([[1, 2, 3]], np.int64)
    logits, = exe.run(input_ids=ids, positions=np.arange(3, dtype=np.int64))
    tok = rlx.Tokenizer("model.gguf")          # or an HF folder / tokenizer.json
    tok.encode("Hello world")  ->  [ids]
"""

import ctypes
import os

import numpy as np

from . import _capi
from .errors import check, error_for
from .graph import Graph

lib = _capi.lib

ADD_SPECIAL = 1    # RLX_TOKENIZE_ADD_SPECIAL
PARSE_SPECIAL = 2  # RLX_TOKENIZE_PARSE_SPECIAL


class _ModelGraph(Graph):
    """The forward graph an LLM owns: closing it does not free it (the model does)."""

    _destroy = staticmethod(lambda handle: None)

    def __init__(self, handle, model):
        super().__init__(handle)
        self._model = model  # the model outlives its graph's Python object


class LLM(_capi.Owned):
    """A loaded model (rlx_llm_load): its config, forward graph and open checkpoint.

    Inputs of the graph: "input_ids" i64 [B, T], "positions" i64 [T]; output:
    logits f32 [B, T, vocab]. batch / seq_len 0 leave B / T symbolic; max_seq
    bounds the positions (0: the model's limit, at most 4096)."""

    _destroy = lib.rlx_llm_destroy
    _kind = "model"

    def __init__(self, path, batch=0, seq_len=0, max_seq=0):
        opts = _capi.LlmOptions()
        lib.rlx_llm_options_init(ctypes.byref(opts))
        opts.batch, opts.seq_len, opts.max_seq = batch, seq_len, max_seq
        handle, err = ctypes.c_void_p(), ctypes.c_void_p()
        status = lib.rlx_llm_load(os.fspath(path).encode(), ctypes.byref(opts),
                                  ctypes.byref(handle), ctypes.byref(err))
        message = _capi.take_string(err.value)
        if status != 0:
            raise error_for(status, message or f"cannot load {path}")
        self._h = handle.value
        self._graph = None

    def _error(self):
        return _capi.text(lib.rlx_llm_last_error(self._h)) if self._h else "model closed"

    @property
    def graph(self):
        """The forward Graph (owned by the model)."""
        if self._graph is None:
            self._graph = _ModelGraph(lib.rlx_llm_graph(self.handle), self)
        return self._graph

    def set_params(self, exe):
        """Sets every param of `exe` (compiled from .graph) from the checkpoint."""
        check(lib.rlx_llm_set_params(self.handle, exe.handle), self._error)

    def compile(self, device="cpu", **options):
        """Compiles the forward graph for `device` and sets its params."""
        exe = self.graph.compile(device, **options)
        self.set_params(exe)
        return exe


def load_llm(path, **options):
    """rlx.LLM(path, ...): a GGUF file or a folder with config.json + safetensors."""
    return LLM(path, **options)


class Tokenizer(_capi.Owned):
    """The tokenizer of a GGUF file's vocab (byte-level BPE or SentencePiece), or of a
    Hugging Face folder / tokenizer.json (rlx_tokenizer_from_hf)."""

    _destroy = lib.rlx_tokenizer_destroy
    _kind = "tokenizer"

    def __init__(self, path):
        handle, err = ctypes.c_void_p(), ctypes.c_void_p()
        status = lib.rlx_tokenizer_load(os.fspath(path).encode(), ctypes.byref(handle),
                                        ctypes.byref(err))
        message = _capi.take_string(err.value)
        if status != 0:
            raise error_for(status, message or f"cannot load a tokenizer from {path}")
        self._h = handle.value

    def _error(self):
        return _capi.text(lib.rlx_tokenizer_last_error(self._h)) if self._h else "closed"

    @property
    def kind(self):
        return _capi.text(lib.rlx_tokenizer_kind(self.handle))

    @property
    def vocab_size(self):
        return lib.rlx_tokenizer_vocab_size(self.handle)

    @property
    def bos(self):
        """Begin-of-sequence id, or None."""
        v = lib.rlx_tokenizer_bos(self.handle)
        return None if v < 0 else v

    @property
    def eos(self):
        v = lib.rlx_tokenizer_eos(self.handle)
        return None if v < 0 else v

    @property
    def chat_template(self):
        """The vocab's chat template (Jinja text), or None."""
        v = lib.rlx_tokenizer_chat_template(self.handle)
        return None if v is None else _capi.text(v)

    def encode(self, text, add_special=True, parse_special=True):
        """Token ids of `text` (str or UTF-8 bytes) as a list of ints."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        flags = (ADD_SPECIAL if add_special else 0) | (PARSE_SPECIAL if parse_special else 0)
        ids, n = ctypes.POINTER(ctypes.c_int32)(), ctypes.c_int64()
        status = lib.rlx_tokenizer_encode(self.handle, data, len(data), flags, ctypes.byref(ids),
                                          ctypes.byref(n))
        try:
            check(status, self._error)
            return [ids[i] for i in range(n.value)]
        finally:
            lib.rlx_free(ctypes.cast(ids, ctypes.c_void_p))

    def decode(self, ids, special=False):
        """The text of token ids (control tokens written out when special)."""
        arr = np.ascontiguousarray(np.asarray(ids, dtype=np.int32).reshape(-1))
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        status = lib.rlx_tokenizer_decode(self.handle,
                                          arr.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                          arr.size, PARSE_SPECIAL if special else 0,
                                          ctypes.byref(out), ctypes.byref(n))
        if status != 0:
            lib.rlx_free(out.value)
            check(status, self._error)
        try:
            return ctypes.string_at(out.value, n.value).decode("utf-8", "replace")
        finally:
            lib.rlx_free(out.value)

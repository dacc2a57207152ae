"""rlx.Tokenizer and rlx.LLM against llama.cpp's vocab test data and the seeded
GGUF models of tests/llm_gguf.py (torch logits); skipped without
third_party/llama.cpp (scripts/setup.sh fetches it) or Debian's torch."""

import os
import subprocess

import numpy as np
import pytest

import rlx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCABS = os.path.join(REPO, "third_party", "llama.cpp", "models")


def vocab(name):
    path = os.path.join(VOCABS, f"ggml-vocab-{name}.gguf")
    if not os.path.exists(path):
        pytest.skip(f"{path} absent (scripts/setup.sh fetches llama.cpp's test data)")
    return path


def test_gpt2_tokenizer_round_trip():
    with rlx.Tokenizer(vocab("gpt-2")) as tok:
        assert tok.vocab_size == 50257
        ids = tok.encode("Hello world, this is GPT-2!")
        assert ids == [15496, 995, 11, 428, 318, 402, 11571, 12, 17, 0]
        assert tok.decode(ids) == "Hello world, this is GPT-2!"
        assert "gpt2" in tok.kind


def test_llama3_special_tokens():
    with rlx.Tokenizer(vocab("llama-bpe")) as tok:
        ids = tok.encode("<|eot_id|>Hi")
        assert ids[0] == tok.bos == 128000 and ids[1] == 128009
        assert tok.encode("<|eot_id|>Hi", parse_special=False)[1] != 128009
        assert tok.decode(ids[1:], special=True).startswith("<|eot_id|>")


def test_tokenizer_errors(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00")
    with pytest.raises(rlx.RlxError, match="bad.gguf"):
        rlx.Tokenizer(bad)
    with rlx.Tokenizer(vocab("gpt-2")) as tok:
        with pytest.raises(rlx.InvalidArgumentError):
            tok.decode([50257])
    tok.close()
    with pytest.raises(ValueError):
        tok.encode("closed")


@pytest.fixture(scope="module")
def gguf_models(tmp_path_factory):
    if not os.path.isdir(os.path.join(REPO, "third_party", "llama.cpp", "gguf-py")):
        pytest.skip("third_party/llama.cpp absent")
    out = tmp_path_factory.mktemp("llm_gguf")
    r = subprocess.run(["/usr/bin/python3", os.path.join(REPO, "tests", "llm_gguf.py"), str(out)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"tests/llm_gguf.py could not write the models: {r.stderr[-300:]}")
    return out


@pytest.mark.parametrize("case", ["llama_f32", "qwen2_q8_0", "llama_q4_k", "gpt2_q8_0",
                                  "gemma2_f16"])
def test_llm_logits_match_torch(gguf_models, case, device):
    d = gguf_models / case
    ids = np.load(d / "input_ids.npy")
    want = np.load(d / "logits.npy")
    with rlx.load_llm(d / "model.gguf") as m:
        exe = m.compile(device)
        got, = exe.run(input_ids=ids, positions=np.arange(ids.shape[1], dtype=np.int64))
    err = np.abs(got - want).max() / np.abs(want).max()
    assert got.shape == want.shape and err < 1e-4, err


@pytest.fixture(scope="module")
def hf_models(tmp_path_factory):
    out = tmp_path_factory.mktemp("llm_hf")
    r = subprocess.run(["/usr/bin/python3", os.path.join(REPO, "tests", "llm_torch.py"), str(out)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"tests/llm_torch.py could not write the models: {r.stderr[-300:]}")
    return out


@pytest.mark.parametrize("case", ["gpt2_noprefix_f16", "gemma2_bf16"])
def test_llm_hf_folder_matches_torch(hf_models, case, device):
    """GPT-2 and Gemma-2 checkpoint folders (config.json + safetensors)."""
    d = hf_models / case
    ids = np.load(d / "input_ids.npy")
    want = np.load(d / "logits.npy")
    with rlx.load_llm(d) as m:
        exe = m.compile(device)
        got, = exe.run(input_ids=ids, positions=np.arange(ids.shape[1], dtype=np.int64))
    err = np.abs(got - want).max() / np.abs(want).max()
    assert got.shape == want.shape and err < 1e-4, err


def test_llm_load_errors(tmp_path):
    with pytest.raises(rlx.NotFoundError):
        rlx.load_llm(tmp_path / "none.gguf")
    (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    with pytest.raises(rlx.RlxError):
        rlx.load_llm(tmp_path)

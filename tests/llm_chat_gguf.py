#!/usr/bin/python3
"""Tiny seeded Llama GGUF files with a vocab and a chat template, for
`rlx generate` / `rlx bench` (tests/cli.sh) and tests/test_llm_cache.c.

The vocab is a SentencePiece one (tokenizer.ggml.model "llama") of
printable pieces only (letters, digits, a little punctuation, each also
with the '\u2581' space prefix) and the control tokens of the common chat
templates, so whatever the random model writes is plain text. No byte
fallback: other characters become <unk>.

OUTDIR/tiny_chatml.gguf   chatml template, EOS <|im_end|>
OUTDIR/tiny_llama3.gguf   llama-3 template, EOS </s>, EOT <|eot_id|>
OUTDIR/tiny_notemplate.gguf  no chat template
OUTDIR/tiny_gpt2.gguf     GPT-2 (learned positions, fused attn_qkv), no template
OUTDIR/tiny_gemma2.gguf   Gemma-2 (window 3 on even layers, softcaps, head_dim
                          != hidden / heads, ffn_up in Q8_0), no template

usage: llm_chat_gguf.py OUTDIR   (exits 77 without third_party/llama.cpp)
"""
import os
import string
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GGUF_PY = os.path.join(os.path.dirname(HERE), "third_party", "llama.cpp", "gguf-py")
if not os.path.isdir(GGUF_PY):
    print("llm_chat_gguf.py: third_party/llama.cpp/gguf-py is missing", file=sys.stderr)
    sys.exit(77)
sys.path.insert(0, GGUF_PY)

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf import quants  # noqa: E402

CONTROL = ["<|im_start|>", "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>",
           "<|end_header_id|>", "<|eot_id|>", "[INST]", "[/INST]", "<start_of_turn>",
           "<end_of_turn>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
          "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
          " + message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
          "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
          "{% endif %}")
D, F, LAYERS, HEADS, KV_HEADS, CTX = 64, 128, 2, 4, 2, 512
GPT2_CTX = 64  # GPT-2's learned positions: the most its context can hold


def vocab():
    tokens, types, scores = ["<unk>", "<s>", "</s>"], [2, 3, 3], [0.0, 0.0, 0.0]
    for c in CONTROL:
        tokens.append(c), types.append(3), scores.append(0.0)
    pieces = list(string.ascii_letters + string.digits + ".,!?'-:")
    for p in pieces + ["\u2581" + p for p in pieces] + ["\u2581", "\n"]:
        tokens.append(p), types.append(1), scores.append(-float(len(p)))
    for w in ["the", "hello", "world", "is", "and"]:
        tokens.append("\u2581" + w), types.append(1), scores.append(-1.0)
    return tokens, types, scores


def add_vocab(wr, tokens, types, scores, eos, eot, template):
    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens)
    wr.add_token_types(types)
    wr.add_token_scores(scores)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(tokens.index(eos))
    wr.add_unk_token_id(0)
    if eot:
        wr.add_eot_token_id(tokens.index(eot))
    if template:
        wr.add_chat_template(template)


def finish(wr):
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def generator(seed):
    """rand(*shape, std) and norm(n) (weights near 1) from one seeded stream."""
    rng = np.random.default_rng(seed)

    def rand(*shape, std=0.08):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm(n=D):
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)
    return rand, norm


def write(path, template, eos, eot, seed):
    tokens, types, scores = vocab()
    V = len(tokens)
    rand, norm = generator(seed)
    wr = gguf.GGUFWriter(path, "llama")
    wr.add_context_length(CTX)
    wr.add_embedding_length(D)
    wr.add_block_count(LAYERS)
    wr.add_feed_forward_length(F)
    wr.add_head_count(HEADS)
    wr.add_head_count_kv(KV_HEADS)
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_rope_dimension_count(D // HEADS)
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_vocab(wr, tokens, types, scores, eos, eot, template)
    hd = D // HEADS
    wr.add_tensor("token_embd.weight", rand(V, D, std=1.0))
    for i in range(LAYERS):
        wr.add_tensor(f"blk.{i}.attn_norm.weight", norm())
        wr.add_tensor(f"blk.{i}.attn_q.weight", rand(HEADS * hd, D))
        wr.add_tensor(f"blk.{i}.attn_k.weight", rand(KV_HEADS * hd, D))
        wr.add_tensor(f"blk.{i}.attn_v.weight", rand(KV_HEADS * hd, D))
        wr.add_tensor(f"blk.{i}.attn_output.weight", rand(D, HEADS * hd))
        wr.add_tensor(f"blk.{i}.ffn_norm.weight", norm())
        wr.add_tensor(f"blk.{i}.ffn_gate.weight", rand(F, D))
        wr.add_tensor(f"blk.{i}.ffn_up.weight", rand(F, D))
        wr.add_tensor(f"blk.{i}.ffn_down.weight", rand(D, F))
    wr.add_tensor("output_norm.weight", norm())
    wr.add_tensor("output.weight", rand(V, D, std=0.5))
    finish(wr)


def write_gpt2(path, seed):
    """GPT-2 as llama.cpp's converter writes it: Linears [out, in], biases,
    LayerNorms with bias, learned positions."""
    tokens, types, scores = vocab()
    rand, norm = generator(seed)
    wr = gguf.GGUFWriter(path, "gpt2")
    wr.add_context_length(GPT2_CTX)
    wr.add_embedding_length(D)
    wr.add_block_count(LAYERS)
    wr.add_feed_forward_length(4 * D)
    wr.add_head_count(HEADS)
    wr.add_layer_norm_eps(1e-5)
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_vocab(wr, tokens, types, scores, "</s>", None, None)
    wr.add_tensor("token_embd.weight", rand(len(tokens), D, std=1.0))
    wr.add_tensor("position_embd.weight", rand(GPT2_CTX, D, std=0.5))
    for i in range(LAYERS):
        for name, out, inp in (("attn_qkv", 3 * D, D), ("attn_output", D, D),
                               ("ffn_up", 4 * D, D), ("ffn_down", D, 4 * D)):
            wr.add_tensor(f"blk.{i}.{name}.weight", rand(out, inp))
            wr.add_tensor(f"blk.{i}.{name}.bias", rand(out, std=0.02))
        for name in ("attn_norm", "ffn_norm"):
            wr.add_tensor(f"blk.{i}.{name}.weight", norm())
            wr.add_tensor(f"blk.{i}.{name}.bias", rand(D, std=0.02))
    wr.add_tensor("output_norm.weight", norm())
    wr.add_tensor("output_norm.bias", rand(D, std=0.02))
    # an untied head: tied, these tiny models only repeat the last token
    wr.add_tensor("output.weight", rand(len(tokens), D, std=0.5))
    finish(wr)


def write_gemma2(path, seed):
    """Gemma-2 as llama.cpp's converter writes it (norm weights hold 1 + w),
    3 layers so that sliding (0, 2) and global (1) layers both appear, a
    window of 3, softcaps small enough to bend the scores and logits."""
    tokens, types, scores = vocab()
    rand, norm = generator(seed)
    hd, layers = 32, 3
    wr = gguf.GGUFWriter(path, "gemma2")
    wr.add_context_length(CTX)
    wr.add_embedding_length(D)
    wr.add_block_count(layers)
    wr.add_feed_forward_length(F)
    wr.add_head_count(HEADS)
    wr.add_head_count_kv(KV_HEADS)
    wr.add_layer_norm_rms_eps(1e-6)
    wr.add_key_length(hd)
    wr.add_value_length(hd)
    wr.add_attn_logit_softcapping(2.0)
    wr.add_final_logit_softcapping(10.0)
    wr.add_sliding_window(3)
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    add_vocab(wr, tokens, types, scores, "<end_of_turn>", None, None)
    wr.add_tensor("token_embd.weight", rand(len(tokens), D, std=0.2))
    for i in range(layers):
        for name in ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"):
            wr.add_tensor(f"blk.{i}.{name}.weight", norm())
        for name, out, inp in (("attn_q", HEADS * hd, D), ("attn_k", KV_HEADS * hd, D),
                               ("attn_v", KV_HEADS * hd, D), ("attn_output", D, HEADS * hd),
                               ("ffn_gate", F, D), ("ffn_down", D, F)):
            wr.add_tensor(f"blk.{i}.{name}.weight", rand(out, inp))
        q8 = quants.quantize(rand(F, D), gguf.GGMLQuantizationType.Q8_0)
        wr.add_tensor(f"blk.{i}.ffn_up.weight", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    wr.add_tensor("output_norm.weight", norm())
    wr.add_tensor("output.weight", rand(len(tokens), D, std=0.5))
    finish(wr)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "tiny_chatml.gguf"), CHATML, "<|im_end|>", None, 11)
    write(os.path.join(out, "tiny_llama3.gguf"), LLAMA3, "</s>", "<|eot_id|>", 12)
    write(os.path.join(out, "tiny_notemplate.gguf"), None, "</s>", None, 13)
    write_gpt2(os.path.join(out, "tiny_gpt2.gguf"), 14)
    write_gemma2(os.path.join(out, "tiny_gemma2.gguf"), 20)


if __name__ == "__main__":
    main()

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


def write(path, template, eos, eot, seed):
    tokens, types, scores = vocab()
    V = len(tokens)
    rng = np.random.default_rng(seed)

    def rand(*shape, std=0.08):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm():
        return (1.0 + rng.standard_normal(D) * 0.1).astype(np.float32)

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
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "tiny_chatml.gguf"), CHATML, "<|im_end|>", None, 11)
    write(os.path.join(out, "tiny_llama3.gguf"), LLAMA3, "</s>", "<|eot_id|>", 12)
    write(os.path.join(out, "tiny_notemplate.gguf"), None, "</s>", None, 13)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes Hugging Face tokenizer folders (tokenizer.json + tokenizer_config.json)
from llama.cpp's ggml-vocab-<name>.gguf test vocabs, following the layout the
Hugging Face tokenizers library writes, so that test_tokenizer_hf can check
rlx_tokenizer_from_hf against the GGUF's own vectors (.inp / .out).

    hf_tokenizer_json.py MODELS_DIR OUT_DIR [name ...]
    (default names: gpt-2 llama-bpe qwen2 llama-spm llama-spm-metaspace; OUT_DIR/<name>/ each)

The formats written differ on purpose, to cover what real checkpoints use:
  gpt-2      ByteLevel pre-tokenizer, merges as "a b" strings
  llama-bpe  Sequence [Split(Llama-3 regex), ByteLevel], merges as [a, b]
             pairs, TemplateProcessing adding <|begin_of_text|>, ignore_merges
  qwen2      Sequence [Split(Qwen2 regex), ByteLevel], NFC normalizer,
             chat_template in tokenizer_config.json
  llama-spm  BPE with byte_fallback, normalizer [Prepend("▁"), Replace(" ", "▁")],
             TemplateProcessing adding <s>; llama-spm-metaspace: the same with
             the Metaspace pre-tokenizer (prepend_scheme first) newer exports write;
             merges made from the SentencePiece scores the way the Hugging Face
             converter makes them: every split of a token into two tokens,
             ordered by the token's score (highest first), then by the ids of
             the halves
Control tokens (GGUF token type 3) become added_tokens with special: true,
user-defined ones (type 4) special: false; added tokens are left out of
model.vocab, as Llama-3's and Qwen2's files do. Needs gguf-py (PYTHONPATH).
"""
import json
import os
import sys

import gguf

REGEX_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
REGEX_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CONTROL, USER_DEFINED = 3, 4


def field(reader, key):
    f = reader.fields.get(key)
    if f is None:
        return None
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]][0].item()


def byte_level(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
            "use_regex": use_regex}


def split_then_byte_level(regex):
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        byte_level(False)]}


def spm_merges(tokens, scores, types):
    """Every (a, b) with a + b a normal token and a, b tokens, by the score of a + b."""
    ids = {t: i for i, t in enumerate(tokens) if types[i] in (1, 6)}
    merges = []
    for i, t in enumerate(tokens):
        if types[i] != 1:
            continue
        for k in range(1, len(t)):
            a, b = t[:k], t[k:]
            if a in ids and b in ids:
                merges.append((-scores[i], ids[a], ids[b], a, b))
    merges.sort()
    return [f"{a} {b}" for _, _, _, a, b in merges]


def convert(models, out_dir, name):
    vocab_name = "llama-spm" if name == "llama-spm-metaspace" else name
    reader = gguf.GGUFReader(os.path.join(models, f"ggml-vocab-{vocab_name}.gguf"))
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type") or [1] * len(tokens)
    bos = field(reader, "tokenizer.ggml.bos_token_id")
    eos = field(reader, "tokenizer.ggml.eos_token_id")
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": types[i] != CONTROL, "special": types[i] == CONTROL}
             for i, t in enumerate(tokens) if types[i] in (CONTROL, USER_DEFINED)]
    vocab = {t: i for i, t in enumerate(tokens) if types[i] not in (CONTROL, USER_DEFINED)}
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
             "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": False, "vocab": vocab}
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
           "model": model}
    gen = None
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast",
           "bos_token": tokens[bos] if bos is not None else None,
           "eos_token": tokens[eos] if eos is not None else None}
    if name == "gpt-2":
        tok["pre_tokenizer"] = byte_level(True)
        tok["post_processor"] = byte_level(True)
        model["merges"] = field(reader, "tokenizer.ggml.merges")
    elif name == "llama-bpe":
        tok["pre_tokenizer"] = split_then_byte_level(REGEX_LLAMA3)
        tok["post_processor"] = {"type": "Sequence", "processors": [byte_level(False), {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": tokens[bos], "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [],
            "special_tokens": {tokens[bos]: {"id": tokens[bos], "ids": [bos],
                                             "tokens": [tokens[bos]]}}}]}
        model["ignore_merges"] = True
        model["merges"] = [m.split(" ", 1) for m in field(reader, "tokenizer.ggml.merges")]
    elif name == "qwen2":
        tok["normalizer"] = {"type": "NFC"}
        tok["pre_tokenizer"] = split_then_byte_level(REGEX_QWEN2)
        model["merges"] = field(reader, "tokenizer.ggml.merges")
        cfg["bos_token"] = None
        cfg["add_bos_token"] = False
        cfg["chat_template"] = field(reader, "tokenizer.chat_template")
        gen = {"bos_token_id": bos, "eos_token_id": [eos]}
    elif name in ("llama-spm", "llama-spm-metaspace"):
        unk = field(reader, "tokenizer.ggml.unknown_token_id")
        scores = field(reader, "tokenizer.ggml.scores")
        model.update({"unk_token": tokens[unk], "fuse_unk": True, "byte_fallback": True,
                      "merges": spm_merges(tokens, scores, types)})
        tok["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
        if name == "llama-spm-metaspace":  # what newer exports write instead
            tok["normalizer"] = None
            tok["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                                    "prepend_scheme": "first", "split": False}
        tok["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": tokens[bos], "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [],
            "special_tokens": {tokens[bos]: {"id": tokens[bos], "ids": [bos],
                                             "tokens": [tokens[bos]]}}}
        cfg["add_bos_token"] = bool(field(reader, "tokenizer.ggml.add_bos_token"))
        cfg["add_eos_token"] = bool(field(reader, "tokenizer.ggml.add_eos_token"))
    else:
        raise SystemExit(f"hf_tokenizer_json: no layout for vocab '{name}'")
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({k: v for k, v in cfg.items() if v is not None}, f, ensure_ascii=False)
    if gen:
        with open(os.path.join(folder, "generation_config.json"), "w", encoding="utf-8") as f:
            json.dump(gen, f)


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    names = sys.argv[3:] or ["gpt-2", "llama-bpe", "qwen2", "llama-spm", "llama-spm-metaspace"]
    for name in names:
        convert(sys.argv[1], sys.argv[2], name)


if __name__ == "__main__":
    main()

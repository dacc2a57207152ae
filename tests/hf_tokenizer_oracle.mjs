// The Hugging Face tokenizer as an oracle for rlx_tokenizer_from_hf:
//   node hf_tokenizer_oracle.mjs MODULE FOLDER TEXTS OUT
// MODULE is @huggingface/tokenizers' dist/tokenizers.mjs (scripts/
// setup_tokenizers_js.sh), FOLDER holds tokenizer.json and
// tokenizer_config.json, TEXTS holds inputs separated by
// "\n__ggml_vocab_test__\n" (the layout of llama.cpp's .inp files). OUT
// gets one line per input: its ids with special tokens (BOS / EOS as the
// post-processor adds them), space-separated.
import fs from "fs";
import path from "path";
import { pathToFileURL } from "url";

const [moduleFile, folder, textsFile, outFile] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(moduleFile).href);
const json = (name) => JSON.parse(fs.readFileSync(path.join(folder, name), "utf8"));
const tokenizer = new Tokenizer(json("tokenizer.json"), json("tokenizer_config.json"));
const texts = fs.readFileSync(textsFile, "utf8").split("\n__ggml_vocab_test__\n");
texts.pop(); // the text after the last separator
const lines = texts.map((t) => tokenizer.encode(t, { add_special_tokens: true }).ids.join(" "));
fs.writeFileSync(outFile, lines.join("\n") + "\n");

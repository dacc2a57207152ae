#!/usr/bin/env bash
# `rlx train` and `rlx generate CHECKPOINT_DIR` as a user runs them:
#  - MODEL.onnx mode against PyTorch (Debian's torch): a tiny MLP exported
#    by tests/train_cli_torch.py, trained by torch and by rlx from the same
#    initializers; the logged losses (before each update) and the saved
#    params must agree to ~1e-5; a frozen param is neither changed nor saved;
#  - bad command lines fail with a message naming what is wrong;
#  - --text mode: a small GPT on examples/jargon.txt for a few dozen steps
#    (the CSV log, the loss falling, the checkpoint, the plot), then
#    `rlx generate` from the checkpoint: the prompt and the asked number of
#    bytes, the same text for the same seed.
# Exits 77 (skipped) when torch or the ONNX importer is missing.
#   tests/train_cli.sh RLX_BINARY
set -u
rlx="$1"
py=/usr/bin/python3
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$py" -c "import torch, numpy" 2>/dev/null || { echo "skipped: no torch at $py"; exit 77; }
"$rlx" run /nonexistent.onnx 2>&1 | grep -q "not built" && { echo "skipped: ONNX import not built"; exit 77; }

# compare FILE_A FILE_B: the largest |a - b| / (|b| + 1e-3) over two .npy
# files or two text files of numbers (CSV "step,loss" rows or one number a line)
compare() {
  "$py" - "$1" "$2" <<'EOF'
import sys, numpy as np
def load(p):
    if p.endswith(".npy"):
        return np.load(p).astype(np.float64).ravel()
    rows = [l.strip() for l in open(p) if l.strip() and not l.startswith("step")]
    return np.array([float(r.split(",")[-1]) for r in rows])
a, b = load(sys.argv[1]), load(sys.argv[2])
if a.shape != b.shape:
    print("shape %s vs %s" % (a.shape, b.shape)); sys.exit(0)
print("%.3g" % np.max(np.abs(a - b) / (np.abs(b) + 1e-3)))
EOF
}
within() { "$py" -c "import sys; sys.exit(0 if float('$1') <= $2 else 1)" 2>/dev/null; }

# ---- MODEL.onnx mode against torch
onnx_case() { # name, then the rlx options beyond the common ones
  local name="$1"; shift
  local d="$tmp/$name"
  mkdir -p "$d"
  "$py" tests/train_cli_torch.py "$d" "$name" >"$d/torch.log" 2>&1 || { fail "$name: torch reference: $(tail -3 "$d/torch.log")"; return; }
  local steps; steps=$(wc -l <"$d/losses.txt")
  local out
  out=$("$rlx" train "$d/model.onnx" --input x="$d/x.npy" --target "$d/target.npy" --output y \
        --steps "$steps" --log "$d/log.csv" --save "$d/got" "$@" 2>&1)
  [ $? -eq 0 ] || { fail "$name: rlx train: $out"; return; }
  [ "$(head -1 "$d/log.csv")" = "step,loss" ] || fail "$name: log header: $(head -1 "$d/log.csv")"
  [ "$(($(wc -l <"$d/log.csv") - 1))" -eq "$steps" ] || fail "$name: log rows: $(cat "$d/log.csv")"
  local err worst; err=$(compare "$d/log.csv" "$d/losses.txt")
  within "$err" 1e-5 || fail "$name: losses differ from torch by $err"
  worst="losses $err"
  for want in "$d"/want/*.npy; do
    local p; p=$(basename "$want")
    [ -f "$d/got/$p" ] || { fail "$name: --save wrote no $p"; continue; }
    err=$(compare "$d/got/$p" "$want")
    within "$err" 1e-5 || fail "$name: param $p differs from torch by $err"
    worst="$worst, ${p%.npy} $err"
  done
  echo "$name: $steps steps vs torch, largest relative differences: $worst"
}
onnx_case ce_adamw --loss cross_entropy --optimizer adamw --lr 0.01
onnx_case mse_sgd --loss mse --optimizer sgd --lr 0.05 --momentum 0.9 --weight-decay 0.001 --freeze fc1.bias
[ -f "$tmp/mse_sgd/got/fc1.bias.npy" ] && fail "mse_sgd: a frozen param was saved"
onnx_case ce_adam --loss cross_entropy --optimizer adam --lr 0.02 --weight-decay 0.01

# ---- bad command lines
d="$tmp/ce_adamw"
base=("$d/model.onnx" --input x="$d/x.npy" --target "$d/target.npy" --output y --steps 2)
expect_error() { # pattern, then the arguments
  local pattern="$1"; shift
  local out; out=$("$rlx" train "$@" 2>&1)
  [ $? -ne 0 ] && grep -q -- "$pattern" <<<"$out" || fail "expected an error with '$pattern': $out"
}
expect_error "missing --loss" "${base[@]}" --optimizer sgd
expect_error "--loss hinge" "${base[@]}" --optimizer sgd --loss hinge
expect_error "--momentum is an SGD option" "${base[@]}" --optimizer adam --loss cross_entropy --momentum 0.9
expect_error "--freeze nope" "${base[@]}" --optimizer sgd --loss cross_entropy --freeze nope
expect_error "no such output" "${base[@]}" --optimizer sgd --loss cross_entropy --output z
expect_error "mse needs float targets" "${base[@]}" --optimizer sgd --loss mse
expect_error "expected --text FILE or a MODEL.onnx"
expect_error "missing MODEL.onnx" --steps 3 --loss mse
expect_error "too short" --text "$d/losses.txt" --steps 1 --context 64

# ---- --text mode: the built-in GPT
t="$tmp/text"
out=$("$rlx" train --text examples/jargon.txt --device cpu --steps 40 --batch 8 --context 32 \
      --layers 1 --heads 2 --dim 32 --lr 0.01 --eval-every 20 --seed 3 --log "$t.csv" \
      --save "$t" --plot "$t.txt" 2>&1)
if [ $? -ne 0 ] && grep -q "UNIMPLEMENTED" <<<"$out"; then
  echo "text mode not checked: a part of training is not implemented yet: $out"
  [ "$failures" -eq 0 ] && echo "PASS (onnx mode)" || echo "$failures failure(s)"
  [ "$failures" -eq 0 ]
  exit
fi
grep -q "trained 40 steps" <<<"$out" || fail "text mode: $out"
[ "$(head -1 "$t.csv")" = "step,loss" ] && [ "$(wc -l <"$t.csv")" -eq 41 ] || fail "text log: $(head -3 "$t.csv")"
# the loss falls: the mean of the last 10 steps well below the first step's
"$py" - "$t.csv" <<'EOF' || fail "text mode: the loss did not fall: $(sed -n '2p;$p' "$t.csv")"
import sys
rows = [float(l.split(",")[1]) for l in open(sys.argv[1]).read().split()[1:]]
sys.exit(0 if sum(rows[-10:]) / 10 < rows[0] - 1.0 else 1)
EOF
[ -f "$t/gpt.cfg" ] && [ -f "$t/manifest.txt" ] && [ -f "$t/wte.npy" ] || fail "checkpoint files: $(ls "$t")"
grep -q "loss (mean per column)" "$t.txt" || fail "text plot: $(head -3 "$t.txt")"
g1=$("$rlx" generate "$t" --device cpu --prompt "The hacker" --tokens 30 --seed 5 2>/dev/null)
g2=$("$rlx" generate "$t" --device cpu --prompt "The hacker" --tokens 30 --seed 5 2>/dev/null)
g3=$("$rlx" generate "$t" --device cpu --prompt "The hacker" --tokens 30 --seed 6 2>/dev/null)
[ "${g1:0:10}" = "The hacker" ] || fail "generate: no prompt echo: $g1"
[ "$(printf '%s' "$g1" | wc -c)" -ge 38 ] || fail "generate: too short: $g1"
[ "$g1" = "$g2" ] || fail "generate: the same seed gave two texts"
[ "$g1" != "$g3" ] || fail "generate: two seeds gave the same text"
# --minutes bounds the run by time; --save-every writes the checkpoint as it goes
out=$("$rlx" train --text examples/jargon.txt --device cpu --minutes 0.05 --batch 2 --context 16 \
      --layers 1 --heads 1 --dim 8 --eval-every 0 --save "$t.m" --save-every 1 2>&1)
[ $? -eq 0 ] && grep -q "trained [1-9][0-9]* steps in 0:0[2-5]" <<<"$out" && [ -f "$t.m/gpt.cfg" ] ||
  fail "--minutes: $out"
expect_error "not both" --text examples/jargon.txt --steps 3 --minutes 1
out=$("$rlx" generate "$tmp" --prompt x 2>&1)
[ $? -ne 0 ] && grep -q "gpt.cfg" <<<"$out" || fail "generate from a folder without gpt.cfg: $out"

[ "$failures" -eq 0 ] && echo PASS || echo "$failures failure(s)"
[ "$failures" -eq 0 ]

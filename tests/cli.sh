#!/usr/bin/env bash
# CLI smoke + behaviour tests: bash tests/cli.sh path/to/rlx (from the repo root).
# Every check compares exit codes and output contents; any mismatch fails.
set -euo pipefail

RLX=${1:?usage: bash tests/cli.sh path/to/rlx}
RLX=$(cd "$(dirname "$RLX")" && pwd)/$(basename "$RLX")
DATA=tests/data/cli
GPT=examples/tiny_gpt.rlx
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OUT=$TMP/stdout
ERR=$TMP/stderr
checks=0

fail() {
  echo "FAIL: $*" >&2
  echo "--- stdout:" >&2; cat "$OUT" >&2 || true
  echo "--- stderr:" >&2; cat "$ERR" >&2 || true
  exit 1
}

# ok DESC -- CMD...: CMD must exit 0 (stdout/stderr kept in $OUT/$ERR).
ok() {
  local desc=$1; shift; shift
  local rc=0
  "$@" >"$OUT" 2>"$ERR" || rc=$?
  [ "$rc" -eq 0 ] || fail "$desc: exit $rc, expected 0 ($*)"
  checks=$((checks + 1))
}

# bad DESC CODE -- CMD...: CMD must exit with CODE (1: failure, 2: usage),
# print something on stderr, and not crash (no signal exit codes).
bad() {
  local desc=$1 want=$2; shift; shift; shift
  local rc=0
  "$@" >"$OUT" 2>"$ERR" || rc=$?
  [ "$rc" -eq "$want" ] || fail "$desc: exit $rc, expected $want ($*)"
  [ -s "$ERR" ] || fail "$desc: no message on stderr"
  checks=$((checks + 1))
}

# has FILE REGEX DESC: FILE must contain a line matching REGEX (grep -E).
has() {
  grep -Eq -- "$2" "$1" || fail "$3: no line matching /$2/ in $(basename "$1")"
  checks=$((checks + 1))
}

# field NAME: the value of NAME=... on the line of output INDEX in $OUT.
field() { sed -n "s/^output $1 .* $2=\([^ ]*\).*/\1/p" "$OUT"; }

# close A B [TOL]: |A - B| <= TOL * max(1, |A|, |B|).
close() {
  awk -v a="$1" -v b="$2" -v t="${3:-1e-5}" 'BEGIN {
    d = a - b; if (d < 0) d = -d; m = 1;
    if (a > m) m = a; if (-a > m) m = -a; if (b > m) m = b; if (-b > m) m = -b;
    exit !(d <= t * m) }' || fail "expected $1 ~= $2"
  checks=$((checks + 1))
}

# ---------------------------------------------------------------- help
ok "rlx help" -- "$RLX" help
has "$OUT" "^usage: rlx" "rlx help"
for c in devices info run bench dot generate example; do
  ok "rlx $c --help" -- "$RLX" "$c" --help
  has "$OUT" "^usage: rlx $c" "rlx $c --help"
done
ok "rlx help run" -- "$RLX" help run
has "$OUT" "ending in \"beta\", \"bias\"" "run --help documents the init rule"
bad "no command" 2 -- "$RLX"
bad "unknown command" 2 -- "$RLX" frobnicate
has "$ERR" "unknown command 'frobnicate'" "unknown command"
bad "unknown option" 2 -- "$RLX" run "$DATA/neg.rlx" --frob
has "$ERR" "unknown option '--frob'" "unknown option"
bad "missing option value" 2 -- "$RLX" run "$DATA/neg.rlx" --seed
has "$ERR" "--seed needs a value" "missing value"
bad "bad integer" 2 -- "$RLX" run "$DATA/neg.rlx" --seed 12x
has "$ERR" "'12x' is not an integer" "bad integer"

# ---------------------------------------------------------------- devices
ok "devices" -- "$RLX" devices
has "$OUT" "^cpu +available" "cpu is available"
for d in cuda vulkan webgpu; do
  # "not built" in a CPU-only build; a GPU build says available/unavailable.
  has "$OUT" "^$d +(not built|unavailable: .+|available)" "$d is listed with its state"
done
[ "$(wc -l <"$OUT")" -eq 4 ] || fail "devices: expected 4 lines"
# lavapipe (llvmpipe) is an emulated device: marked software.
if grep -q "llvmpipe" "$OUT"; then
  has "$OUT" "^(vulkan|webgpu) +available \(software: .*llvmpipe" "lavapipe is marked software"
  if grep -Eq "llvmpipe" <(grep -v "software" "$OUT"); then fail "a llvmpipe device is not marked software"; fi
fi

# Quiet by default: drivers (Mesa's WSI without XDG_RUNTIME_DIR, Dawn's
# adapter warnings) write to fd 2 while devices start; without -v none of
# it reaches stderr. Where the drivers are noisy here, -v shows it.
for xdg in /nonexistent unset; do
  if [ "$xdg" = unset ]; then envx=(env -u XDG_RUNTIME_DIR); else envx=(env XDG_RUNTIME_DIR=$xdg); fi
  ok "devices quiet ($xdg)" -- "${envx[@]}" "$RLX" devices
  [ ! -s "$ERR" ] || fail "rlx devices printed on stderr without -v (XDG_RUNTIME_DIR $xdg)"
  checks=$((checks + 1))
  cp "$OUT" "$TMP/quiet_devices"
  ok "devices -v ($xdg)" -- "${envx[@]}" "$RLX" devices -v
  cmp -s "$OUT" "$TMP/quiet_devices" || fail "-v changed the device list"
  checks=$((checks + 1))
  [ -s "$ERR" ] && echo "cli.sh: with -v the drivers said $(wc -l <"$ERR") line(s) (XDG_RUNTIME_DIR $xdg)"
done
ok "rlx -v devices" -- "$RLX" -v devices
has "$OUT" "^cpu +available" "-v before the command"
# rlx's own errors still come through when the drivers are silenced.
bad "compile error not swallowed" 1 -- env XDG_RUNTIME_DIR=/nonexistent "$RLX" run "$DATA/neg.rlx" \
  --device nosuchdev
has "$ERR" "unknown device 'nosuchdev'" "errors printed without -v"

# ---------------------------------------------------------------- info
ok "info sym" -- "$RLX" info "$DATA/sym.rlx"
has "$OUT" "^inputs \(1\):" "info counts inputs"
has "$OUT" "^  x +f32\[batch,4\]$" "info input with a symbolic dim"
has "$OUT" "^  w +f32\[4,5\]  \(20 values\)$" "info param values"
has "$OUT" "^  b\.bias +f32\[5\]  \(5 values\)$" "info second param"
has "$OUT" "^  total 25 values$" "info param total"
has "$OUT" "^  h +f32\[batch,5\]$" "info output"
has "$OUT" "^symbols: batch$" "info symbols"
has "$OUT" "^  fused_matmul_bias_act +1  native " "info op row: count and cpu"
ok "info --help" -- "$RLX" info --help
has "$OUT" "decomposed\+host" "info --help explains the columns"
bad "info missing file" 1 -- "$RLX" info "$TMP/nothere.rlx"
bad "info bad option" 2 -- "$RLX" info "$DATA/sym.rlx" --frob
bad "info no file" 2 -- "$RLX" info
# mixed.rlx: f64 ops the shader backends lack. Every non-leaf node is counted.
ok "info mixed" -- "$RLX" info "$DATA/mixed.rlx"
n_ops=$(grep -Ec '^%[0-9]+ = ' "$DATA/mixed.rlx")
n_leaf=$(grep -Ec '^%[0-9]+ = (input|param|constant)' "$DATA/mixed.rlx")
has "$OUT" "^ops \($((n_ops - n_leaf)) nodes, 4 kinds" "info counts the nodes"
has "$OUT" "^  op +count +cpu +cuda +vulkan +webgpu$" "info device columns"
for op in cast binary activation fused_matmul_bias_act; do
  has "$OUT" "^  $op +1  native " "cpu runs $op natively"
done
# A device's cell in the table: the text under its header (columns are fixed
# width; a cell may hold two words, e.g. "not built").
cell() { # cell DEVICE OP
  awk -v d="$1" -v op="$2" '$1 == "op" { at = index($0 " ", " " d " ") + 1 }
    $1 == op && at { s = substr($0, at, 18); sub(/ +$/, "", s); print s; exit }' "$OUT"
}
for dev in vulkan webgpu; do # the static rule answers even without a device
  [ "$(cell "$dev" cast)" = "not built" ] && continue
  got="$(cell "$dev" fused_matmul_bias_act) / $(cell "$dev" activation) / $(cell "$dev" binary)"
  [ "$got" = "decomposed+host / host / native" ] ||
    fail "info mixed on $dev: expected decomposed+host / host / native, got $got"
  checks=$((checks + 1))
done
ok "info mixed --json" -- "$RLX" info "$DATA/mixed.rlx" --json
cp "$OUT" "$TMP/info.json"
has "$OUT" "\"op\": \"fused_matmul_bias_act\", \"count\": 1, \"devices\": \{\"cpu\": \{\"native\": 1," \
  "info JSON op entry"
if [ -x /usr/bin/python3 ]; then
  # The static answer agrees with what compiling does (the dispatch report's
  # decomposed column) on every device that can run here.
  ok "devices for info" -- "$RLX" devices
  for dev in $(awk '$2 ~ /^available/ { print $1 }' "$OUT"); do
    ok "mixed report on $dev" -- "$RLX" run "$DATA/mixed.rlx" --device "$dev" --report --random-params
    /usr/bin/python3 - "$TMP/info.json" "$OUT" "$dev" <<'PY' || fail "info and the $dev report disagree"
import json, re, sys
info = json.load(open(sys.argv[1]))
assert info["symbols"] == [] and len(info["params"]) == 2 and info["params"][0]["values"] == 12
want = {o["op"]: o["devices"][sys.argv[3]]["decomposed"] for o in info["ops"]}
got = {}
for line in open(sys.argv[2]):
    m = re.match(r"\s+(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", line)
    if m: got[m.group(1)] = int(m.group(4))
for op, n in want.items():
    assert got.get(op, 0) == n, (op, n, got)
PY
    checks=$((checks + 1))
  done
fi

# ---------------------------------------------------------------- run: errors
bad "missing file" 1 -- "$RLX" run "$TMP/nothere.rlx"
has "$ERR" "nothere.rlx.*cannot open: No such file" "missing file"
bad "syntax error" 1 -- "$RLX" run "$DATA/bad_syntax.rlx"
has "$ERR" "bad_syntax.rlx:3:[0-9]+: .*nag" "syntax error names line:col and the token"
bad "shape error" 1 -- "$RLX" run "$DATA/bad_shape.rlx"
has "$ERR" "bad_shape.rlx:4:[0-9]+: .*matmul" "shape error names line:col and the op"
bad "missing onnx" 1 -- "$RLX" run "$TMP/model.onnx"
has "$ERR" "model.onnx: .*(ONNX import not built|cannot open)" "missing .onnx file"
bad "unknown device" 1 -- "$RLX" run "$DATA/neg.rlx" --device nosuchdev
has "$ERR" "unknown device 'nosuchdev'" "unknown device is named"
bad "unbound symbol" 1 -- "$RLX" run "$DATA/sym.rlx" --random-params
has "$ERR" "symbol 'batch' is unbound" "unbound symbol"
bad "bind unknown symbol" 1 -- "$RLX" run "$DATA/sym.rlx" --bind batch=2 --bind seq=3
has "$ERR" "no symbol 'seq' \(symbols: batch\)" "bind of an unknown symbol lists the symbols"

# ---------------------------------------------------------------- run: outputs
ok "run neg" -- "$RLX" run "$DATA/neg.rlx" --seed 7
has "$OUT" "^output 0 y: f32\[2,3\] = ([-0-9.e]+ ){6} sum=" "run prints name, type, values, sum"
first_out=$(cat "$OUT")
ok "run neg again" -- "$RLX" run "$DATA/neg.rlx" --seed 7
[ "$(cat "$OUT")" = "$first_out" ] || fail "same seed, different output"
ok "run neg other seed" -- "$RLX" run "$DATA/neg.rlx" --seed 8
[ "$(cat "$OUT")" != "$first_out" ] || fail "different seed, same output"

# --save writes .npy that --input reads back: neg(neg(x)) == x.
ok "run --save" -- "$RLX" run "$DATA/neg.rlx" --seed 7 --save "$TMP/s1"
[ -s "$TMP/s1/out0.npy" ] || fail "--save wrote no out0.npy"
sum1=$(field 0 sum)
bad "input of unknown name" 1 -- "$RLX" run "$DATA/neg.rlx" --input "nope=$TMP/s1/out0.npy"
has "$ERR" "no input named 'nope' \(inputs: x\)" "bad --input names the input and lists the inputs"
ok "run --input saved" -- "$RLX" run "$DATA/neg.rlx" --input "x=$TMP/s1/out0.npy" --save "$TMP/s2"
sum2=$(field 0 sum)
close "$sum2" "$(awk -v s="$sum1" 'BEGIN { print -s }')"
ok "run --input twice-negated" -- "$RLX" run "$DATA/neg.rlx" --input "x=$TMP/s2/out0.npy"
[ "$(field 0 sum)" = "$sum1" ] || fail "neg(neg(y)) != y: $(field 0 sum) vs $sum1"
printf 'not a numpy file' >"$TMP/garbage.npy"
bad "corrupt npy" 1 -- "$RLX" run "$DATA/neg.rlx" --input "x=$TMP/garbage.npy"
has "$ERR" "input 'x': .*garbage.npy" "corrupt .npy names the input and file"
bad "input of wrong shape" 1 -- "$RLX" run "$DATA/vec.rlx" --input "v=$TMP/s1/out0.npy"
has "$ERR" "input 'v'" "wrong-rank input is named"

# Symbols: from --bind, or from an input's shape.
# --channels-last: the NCHW conv + pool runs NHWC inside (x in and y out
# transposed in the run; w's transpose is param-only, so it is hoisted out
# of the run into the param 'hoisted.0'), same output shape.
ok "run --channels-last" -- "$RLX" run "$DATA/conv.rlx" --random-params --channels-last
grep -q "out0: f32\[1,3,2,2\]" "$OUT" || fail "--channels-last changed the output"
ok "dot --after --channels-last" -- "$RLX" dot "$DATA/conv.rlx" --after --channels-last
[ "$(grep -c transpose "$OUT")" -eq 2 ] || fail "--channels-last: expected 2 transposes in the run"
grep -q "param 'hoisted.0'" "$OUT" || fail "--channels-last: the weight transpose is not hoisted"
ok "dot --after" -- "$RLX" dot "$DATA/conv.rlx" --after
grep -q transpose "$OUT" && fail "a transpose without --channels-last"
ok "run sym --bind" -- "$RLX" run "$DATA/sym.rlx" --bind batch=3 --save "$TMP/sym" --random-params
has "$OUT" "^output 0 h: f32\[3,5\]" "--bind sets the shape"
ok "make x[7,4]" -- "$RLX" run "$DATA/rows.rlx" --save "$TMP/rows"
ok "run sym from npy" -- "$RLX" run "$DATA/sym.rlx" --input "x=$TMP/rows/out0.npy" --random-params
has "$OUT" "^output 0 h: f32\[7,5\]" "an input's shape binds the symbol"
bad "conflicting binding" 1 -- "$RLX" run "$DATA/sym.rlx" --bind batch=3 --input "x=$TMP/rows/out0.npy" \
  --random-params
has "$ERR" "'batch' bound to both 3 and 7" "conflicting binding"

# Param init rule: ".g" -> 1, ".b" -> 0, others normal(0, 0.02).
ok "init rule" -- "$RLX" run "$DATA/init.rlx" --random-params
has "$OUT" "^output 0 neg_g: f32\[4\] = -1 -1 -1 -1 " ".g params are 1"
close "$(field 1 abs_sum)" 0
w_abs=$(field 2 abs_sum)
awk -v a="$w_abs" 'BEGIN { exit !(a > 0.2 && a < 2.5) }' || fail "normal(0,0.02) x64: abs_sum $w_abs"
checks=$((checks + 1))
init0=$(cat "$OUT")
ok "init other seed" -- "$RLX" run "$DATA/init.rlx" --init-params 5
[ "$(cat "$OUT")" != "$init0" ] || fail "--init-params did not change the weights"
ok "init same seed" -- "$RLX" run "$DATA/init.rlx" --init-params 0
[ "$(cat "$OUT")" = "$init0" ] || fail "param init is not deterministic"

# --params DIR: w.npy is loaded, y = x + w, z = -w.
ok "make w" -- "$RLX" run "$DATA/vec.rlx" --seed 3 --save "$TMP/w"
negv_sum=$(field 0 sum)
mkdir -p "$TMP/params"
cp "$TMP/w/out0.npy" "$TMP/params/w.npy"
ok "run --params" -- "$RLX" run "$DATA/params.rlx" --params "$TMP/params"
close "$(field 1 sum)" "$(awk -v s="$negv_sum" 'BEGIN { print -s }')"
cp "$TMP/s1/out0.npy" "$TMP/params/w.npy"
bad "param of wrong shape" 1 -- "$RLX" run "$DATA/params.rlx" --params "$TMP/params"
has "$ERR" "param 'w'" "wrong-shape param is named"

# Params need a value: from --params DIR (every param, or the rest made up
# with --random-params), from the model file (ONNX), or made up on request.
bad "params without values" 1 -- "$RLX" run "$DATA/params.rlx"
has "$ERR" "1 param\(s\) have no value: w\b.*--random-params" "missing params are named"
bad "--params missing dir" 1 -- "$RLX" run "$DATA/params.rlx" --params "$TMP/nodir"
has "$ERR" "--params .*nodir: No such file" "a missing --params folder is an error"
bad "--params a file" 1 -- "$RLX" run "$DATA/params.rlx" --params "$DATA/params.rlx"
has "$ERR" "not a folder" "a --params file is an error"
mkdir -p "$TMP/empty"
bad "--params dir without the param" 1 -- "$RLX" run "$DATA/params.rlx" --params "$TMP/empty"
has "$ERR" "have no value: w\b" "a param missing from DIR is named"
mkdir -p "$TMP/stray"
cp "$TMP/w/out0.npy" "$TMP/stray/W.npy"
bad "--params stray file" 1 -- "$RLX" run "$DATA/params.rlx" --params "$TMP/stray"
has "$ERR" "W.npy matches no param of the graph \(params: w\)" "a stray file lists the params"
ok "--random-params" -- "$RLX" run "$DATA/params.rlx" --random-params
has "$ERR" "made up 1 param\(s\), 3 values \(seed 0\)" "made-up params are counted on stderr"
[ "$(wc -l <"$ERR")" -eq 1 ] || fail "--random-params: expected one line on stderr"
checks=$((checks + 1))
cp "$TMP/w/out0.npy" "$TMP/params/w.npy"
ok "--params with no made-up params" -- "$RLX" run "$DATA/params.rlx" --params "$TMP/params" --random-params
[ ! -s "$ERR" ] || fail "params all from DIR, yet stderr says something"
checks=$((checks + 1))
# init.rlx has 3 params: ln.g from DIR (-1s, saved from neg_g), the others made up.
ok "make ln.g" -- "$RLX" run "$DATA/init.rlx" --random-params --save "$TMP/ng"
mkdir -p "$TMP/partial"
cp "$TMP/ng/out0.npy" "$TMP/partial/ln.g.npy"
ok "--params + --random-params" -- "$RLX" run "$DATA/init.rlx" --params "$TMP/partial" --random-params
has "$OUT" "^output 0 neg_g: f32\[4\] = 1 1 1 1 " "ln.g came from DIR"
has "$ERR" "made up 2 param\(s\), 68 values" "only the params DIR lacks are made up"
n_init=$(grep -c 'param name=' "$DATA/init.rlx")
ok "--init-params implies made-up params" -- "$RLX" run "$DATA/init.rlx" --init-params 3
has "$ERR" "made up $n_init param\(s\)" "--init-params makes up every param"

# Random integer inputs stay in [0, 4) (valid indices), bools work.
ok "run gather" -- "$RLX" run "$DATA/gather.rlx" --seed 11 --random-params
has "$OUT" "^output 1 out1: i64\[5\] = [0-3] [0-3] [0-3] [0-3] [0-3] " "random ints in [0, 4)"

# --report prints the dispatch report.
ok "run --report" -- "$RLX" run "$DATA/neg.rlx" --report
has "$OUT" "arena" "report shows the arena"

# ONNX models (from Debian's libonnx-testdata, when installed): relu of the
# expected output equals the expected output.
ONNX_RELU=/usr/share/libonnx-testdata/data/node/test_relu
if [ -f "$ONNX_RELU/model.onnx" ]; then
  rc=0
  "$RLX" run "$ONNX_RELU/model.onnx" >"$OUT" 2>"$ERR" || rc=$?
  if grep -q "ONNX import not built" "$ERR"; then
    [ "$rc" -eq 1 ] || fail "onnx not built: exit $rc, expected 1"
    echo "cli.sh: ONNX import not built: ONNX checks skipped"
  else
    [ "$rc" -eq 0 ] || fail "run model.onnx: exit $rc"
    has "$OUT" "^output 0 y: f32\[3,4,5\]" "onnx output type"
    ok "info onnx" -- "$RLX" info "$ONNX_RELU/model.onnx"
    has "$OUT" "^  x +f32\[3,4,5\]$" "info on an .onnx model"
    ok "onnx input .pb" -- "$RLX" run "$ONNX_RELU/model.onnx" \
      --input "x=$ONNX_RELU/test_data_set_0/input_0.pb"
    want=$(field 0 sum)
    ok "onnx expected output as input" -- "$RLX" run "$ONNX_RELU/model.onnx" \
      --input "x=$ONNX_RELU/test_data_set_0/output_0.pb"
    close "$(field 0 sum)" "$want"
    awk -v a="$want" 'BEGIN { exit !(a > 1) }' || fail "relu sum $want should be > 1"
  fi
else
  echo "cli.sh: no libonnx-testdata: ONNX checks skipped"
fi

# ---------------------------------------------------------------- example
ok "example gpt" -- "$RLX" example gpt
cmp -s "$OUT" "$GPT" || fail "$GPT is stale: regenerate it with: rlx example gpt --out $GPT"
checks=$((checks + 1))
bad "example bad heads" 2 -- "$RLX" example gpt --dim 30 --heads 4
has "$ERR" "not a multiple" "dim/heads check"
bad "example unknown" 2 -- "$RLX" example llama
ok "example small" -- "$RLX" example gpt --vocab 50 --dim 16 --layers 1 --heads 2 --ctx 8 \
  --out "$TMP/small.rlx"
ok "run small" -- "$RLX" run "$TMP/small.rlx" --random-params
has "$OUT" "^output 0 logits: f32\[8,50\]" "small gpt logits shape"

# ---------------------------------------------------------------- run + dot + bench on the GPT
ok "run gpt" -- "$RLX" run "$GPT" --report --random-params
has "$OUT" "^output 0 logits: f32\[32,256\]" "gpt logits shape"
has "$OUT" "attention" "report lists attention"
cpu_sum=$(field 0 sum)
cpu_abs=$(field 0 abs_sum)
ok "run gpt --strict" -- "$RLX" run "$GPT" --strict --random-params
# --precision bf16: same interface (f32 logits), close to the f32 checksum,
# and the compiled graph computes in bf16 (dot after passes)
ok "run gpt --precision bf16" -- "$RLX" run "$GPT" --precision bf16 --random-params
has "$OUT" "^output 0 logits: f32\[32,256\]" "bf16 gpt logits stay f32"
close "$(field 0 abs_sum)" "$cpu_abs" 3e-2
ok "dot gpt --precision bf16" -- "$RLX" dot "$GPT" --after --precision bf16
has "$OUT" "matmul.*: bf16\[" "bf16 matmul after passes"
bad "--precision f8" 2 -- "$RLX" run "$GPT" --precision f8 --random-params
has "$ERR" "expected bf16, f16 or f32" "bad --precision value"
# Every other available device computes the same logits (checksums).
ok "devices" -- "$RLX" devices
for dev in $(awk '$1 != "cpu" && $2 ~ /^available/ { print $1 }' "$OUT"); do
  ok "run gpt on $dev" -- "$RLX" run "$GPT" --device "$dev" --random-params
  has "$OUT" "^output 0 logits: f32\[32,256\]" "gpt logits shape on $dev"
  close "$(field 0 abs_sum)" "$cpu_abs" 1e-4
  close "$(field 0 sum)" "$cpu_sum" 1e-3
done
ok "dot" -- "$RLX" dot "$GPT"
has "$OUT" "^digraph" "dot output"
has "$OUT" "attention" "dot shows attention"
ok "dot --after" -- "$RLX" dot "$GPT" --after
has "$OUT" "^digraph .*after passes" "dot --after title"
ok "dot sym --after" -- "$RLX" dot "$DATA/sym.rlx" --after --bind batch=2
bad "dot bad file" 1 -- "$RLX" dot "$DATA/bad_syntax.rlx"
has "$ERR" "bad_syntax.rlx:3:" "dot parse error"
bad "bench without params" 1 -- "$RLX" bench "$GPT" --warmup 1 --iters 3
has "$ERR" "28 param\(s\) have no value: wte, wpe, .*, \.\.\." "long lists end with ..."
ok "bench" -- "$RLX" bench "$GPT" --warmup 1 --iters 3 --random-params
has "$OUT" "median [0-9.]+ ms, p10 [0-9.]+ ms, p90 [0-9.]+ ms" "bench summary"
has "$OUT" "^  compile +[0-9.]+ ms, first run [0-9.]+ ms" "bench compile time"
has "$OUT" "^  latency +min [0-9.]+ +median [0-9.]+ +mean [0-9.]+ +p99 [0-9.]+ +max [0-9.]+ +stddev [0-9.]+ ms" \
  "bench latency line"
has "$OUT" "^  memory +arena [0-9.]+ MiB .*peak RSS [0-9.]+ MiB" "bench memory line"
has "$OUT" "^\{\"name\": \".*tiny_gpt.rlx\", \"device\": \"cpu\", \"iters\": 3, " "bench JSON line"
bad "bench bad iters" 2 -- "$RLX" bench "$GPT" --iters 0 --random-params
# --trace: one Chrome trace event per step per run (warmup + iters), valid JSON.
ok "bench --trace" -- "$RLX" bench "$GPT" --warmup 1 --iters 2 --random-params --trace "$TMP/trace.json"
grep -q '^{"traceEvents":\[' "$TMP/trace.json" || fail "bench --trace: no trace file"
[ "$(grep -c '"ph":"X"' "$TMP/trace.json")" -ge 3 ] || fail "bench --trace: fewer events than runs"
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/trace.json" ||
    fail "bench --trace: not valid JSON"
fi
bad "bench --trace unwritable" 1 -- "$RLX" bench "$GPT" --iters 1 --random-params --trace /nonexistent-dir/t.json
has "$ERR" "cannot write '/nonexistent-dir/t.json'" "bench --trace names the path"
bad "bench bad -o" 2 -- "$RLX" bench "$GPT" -o xml --random-params
has "$ERR" "unknown format 'xml'" "bench -o names the format"
bad "bench bad --threads" 2 -- "$RLX" bench "$GPT" --threads x --random-params
# -o json: one object whose numbers are consistent with each other and with
# the dispatch report's arena.
ok "bench -o json" -- "$RLX" bench "$GPT" --warmup 1 --iters 7 --threads 1 -o json --random-params
[ "$(wc -l <"$OUT")" -eq 1 ] || fail "bench -o json: expected one line"
cp "$OUT" "$TMP/bench.json"
ok "report arena" -- "$RLX" run "$GPT" --report --random-params
arena=$(sed -n 's/^  arena \([0-9]*\) bytes.*/\1/p' "$OUT")
awk -v a="$arena" 'BEGIN { exit !(a > 0) }' || fail "no arena in the report"
jnum() { sed -n "s/.*\"$1\": \([-0-9.e]*\).*/\1/p" "$TMP/bench.json"; }
for k in compile_ms first_run_ms min_ms median_ms mean_ms p99_ms max_ms stddev_ms runs_per_s \
  arena_bytes tensor_bytes peak_rss_bytes; do
  [ -n "$(jnum $k)" ] || fail "bench -o json lacks $k: $(cat "$TMP/bench.json")"
done
checks=$((checks + 1))
awk -v mn="$(jnum min_ms)" -v md="$(jnum median_ms)" -v mean="$(jnum mean_ms)" \
  -v p99="$(jnum p99_ms)" -v mx="$(jnum max_ms)" -v sd="$(jnum stddev_ms)" \
  -v rps="$(jnum runs_per_s)" -v rss="$(jnum peak_rss_bytes)" -v th="$(jnum threads)" 'BEGIN {
    ok = mn > 0 && mn <= md && md <= p99 && p99 <= mx && mn <= mean && mean <= mx && sd >= 0 &&
         (rps * mean > 999 && rps * mean < 1001) && rss > 1000000 && th == 1
    exit !ok }' || fail "bench -o json numbers are inconsistent: $(cat "$TMP/bench.json")"
checks=$((checks + 1))
[ "$(jnum arena_bytes)" = "$arena" ] || fail "bench arena $(jnum arena_bytes) != report arena $arena"
checks=$((checks + 1))
if command -v /usr/bin/python3 >/dev/null; then
  /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["iters"] == 7' \
    "$TMP/bench.json" || fail "bench -o json is not valid JSON"
  checks=$((checks + 1))
fi
ok "bench -o csv" -- "$RLX" bench "$GPT" --warmup 0 --iters 2 -o csv --random-params
[ "$(wc -l <"$OUT")" -eq 2 ] || fail "bench -o csv: expected header + row"
has "$OUT" "^name,device,iters,warmup,threads,compile_ms,.*,peak_rss_bytes$" "csv header"
[ "$(head -1 "$OUT" | tr -cd , | wc -c)" = "$(tail -1 "$OUT" | tr -cd , | wc -c)" ] ||
  fail "csv header and row differ in columns"
checks=$((checks + 1))
ok "bench -o md" -- "$RLX" bench "$GPT" --warmup 0 --iters 2 --output md --random-params
[ "$(wc -l <"$OUT")" -eq 3 ] || fail "bench -o md: expected a 3-line table"
has "$OUT" "^\| name \| device \|.*\| median_ms \|" "md header"
has "$OUT" "^\|---\|" "md rule"

# ---------------------------------------------------------------- generate
ok "generate" -- "$RLX" generate "$GPT" --random-params --device cpu --prompt 5,6,7 --tokens 6 --report
has "$OUT" "^prompt: 5 6 7$" "generate prints the prompt"
has "$OUT" "^generated:( [0-9]+){6}$" "generate makes 6 tokens"
has "$OUT" "per-token latency: median [0-9.]+ ms; total [0-9.]+ ms for 6 tokens" "latency"
has "$OUT" "arena" "generate --report"
gen=$(sed -n 's/^generated: //p' "$OUT")
# Greedy decoding is deterministic, and the padding after the last real token
# cannot matter (causal mask): continuing from prompt + 3 generated tokens
# must reproduce the last 3.
read -r g1 g2 g3 g4 g5 g6 <<<"$gen"
ok "generate continued" -- "$RLX" generate "$GPT" --random-params --device cpu --prompt "5,6,7,$g1,$g2,$g3" --tokens 3
has "$OUT" "^generated: $g4 $g5 $g6$" "continuation matches"
ok "generate to full context" -- "$RLX" generate "$GPT" --random-params --device cpu --prompt 1 --tokens 40
has "$OUT" "context window \(ctx 32\) is full" "stops at ctx"
has "$OUT" "^generated:( [0-9]+){31}$" "fills the window"
ok "generate sampled" -- "$RLX" generate "$GPT" --random-params --device cpu --prompt 1,2 --tokens 5 --temperature 50 --seed 4
s1=$(grep '^generated' "$OUT")
ok "generate sampled again" -- "$RLX" generate "$GPT" --random-params --device cpu --prompt 1,2 --tokens 5 --temperature 50 --seed 4
[ "$(grep '^generated' "$OUT")" = "$s1" ] || fail "sampling with a seed is not reproducible"
bad "prompt out of vocab" 2 -- "$RLX" generate "$GPT" --random-params --device cpu --prompt 1,999
has "$ERR" "999 is outside \[0, 255\]" "prompt range"
bad "prompt malformed" 2 -- "$RLX" generate "$GPT" --random-params --device cpu --prompt 1,,2
bad "generate on a non-LM graph" 1 -- "$RLX" generate "$DATA/neg.rlx" --device cpu
has "$ERR" "input 'x'" "generate names the unexpected input"

# A FIFO as a graph is refused at once (never waited on); a missing file and
# a parse error name the path.
mkfifo "$TMP/fifo.rlx"
bad "FIFO graph" 1 -- timeout 20 "$RLX" run "$TMP/fifo.rlx"
has "$ERR" "fifo.rlx.*FIFO" "the FIFO is named"
bad "missing graph" 1 -- "$RLX" run "$TMP/none.rlx"
has "$ERR" "none.rlx.*No such file or directory" "missing graph: path and reason"
printf 'garbage\n' > "$TMP/garbage.rlx"
bad "unparsable graph" 1 -- "$RLX" run "$TMP/garbage.rlx"
has "$ERR" "garbage.rlx:1:1: " "a parse error names path:line:col"

# GGUF files and tokenizers (llama.cpp's vocab test data, when present)
VOCABS=third_party/llama.cpp/models
if [ -f "$VOCABS/ggml-vocab-gpt-2.gguf" ]; then
  ok "tokenize gpt-2" -- "$RLX" tokenize "$VOCABS/ggml-vocab-gpt-2.gguf" "Hello world, this is GPT-2!"
  has "$OUT" "^\[15496, 995, 11, 428, 318, 402, 11571, 12, 17, 0\]$" "GPT-2 ids"
  ok "tokenize --decode" -- "$RLX" tokenize "$VOCABS/ggml-vocab-gpt-2.gguf" --decode "15496,995"
  has "$OUT" "^Hello world$" "decoded text"
  ok "tokenize llama-3 specials" -- "$RLX" tokenize "$VOCABS/ggml-vocab-llama-bpe.gguf" "<|eot_id|>Hi" --pieces
  has "$OUT" "128000 -> '<|begin_of_text|>'" "BOS added"
  has "$OUT" "128009 -> '<|eot_id|>'" "special token parsed"
  bad "tokenize a non-GGUF" 1 -- "$RLX" tokenize "$DATA/neg.rlx" "x"
  has "$ERR" "neg.rlx.*not a GGUF file" "names the file"
  ok "info gguf" -- "$RLX" info "$VOCABS/ggml-vocab-llama-spm.gguf"
  has "$OUT" "GGUF version 3, alignment 32, 22 metadata keys, 0 tensors" "GGUF header line"
  has "$OUT" "tokenizer.ggml.tokens  *string\[32000\]" "token array listed"
fi

# safetensors (written here: 8-byte header length, JSON header, data)
if command -v python3 >/dev/null; then
  python3 - "$TMP/tiny.safetensors" <<'PY'
import json, struct, sys
hdr = {"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
       "b": {"dtype": "F16", "shape": [3], "data_offsets": [24, 30]},
       "__metadata__": {"format": "pt"}}
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + struct.pack("<6f", *range(6)) + b"\0" * 6)
PY
  ok "info safetensors" -- "$RLX" info "$TMP/tiny.safetensors"
  has "$OUT" "2 tensors in 1 file" "tensor count"
  has "$OUT" "^  w  *f32  *\[2, 3\]  *24 " "tensor row: name, dtype, shape, bytes"
  has "$OUT" "metadata format = pt" "metadata listed"
  head -c 20 "$TMP/tiny.safetensors" > "$TMP/cut.safetensors"
  bad "truncated safetensors" 1 -- "$RLX" info "$TMP/cut.safetensors"
  has "$ERR" "cut.safetensors" "names the file"
fi

# LLM generation and bench (issue 17 item 5) on tiny GGUF models with a vocab
# and chat templates (tests/llm_chat_gguf.py: gguf-py + numpy).
if [ -d third_party/llama.cpp/gguf-py ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null &&
   /usr/bin/python3 tests/llm_chat_gguf.py "$TMP/llm" >/dev/null; then
  CHATML=$TMP/llm/tiny_chatml.gguf
  LLAMA3=$TMP/llm/tiny_llama3.gguf
  gen=("$RLX" generate --device cpu)
  ok "generate greedy" -- "${gen[@]}" "$CHATML" --prompt "hello world" -n 8 --temperature 0
  has "$ERR" "generated 8 tokens in .* t/s" "timing on stderr"
  has "$ERR" "prompt [0-9]+ tokens in .* t/s" "prompt timing on stderr"
  has "$ERR" "loading weights .*100%" "progress bar"
  [ -n "$(tr -d ' \n' < "$OUT")" ] || fail "generate printed no text"
  cp "$OUT" "$TMP/greedy.txt"
  ok "generate greedy again" -- "${gen[@]}" "$CHATML" --prompt "hello world" -n 8 --temperature 0
  cmp -s "$OUT" "$TMP/greedy.txt" || fail "greedy generation is not repeatable"
  ok "generate seeded" -- "${gen[@]}" "$CHATML" --prompt "hello" -n 12 --temperature 1.2 --seed 5 \
     --top-k 20 --top-p 0.9 --min-p 0.02 --repeat-penalty 1.3 --repeat-last-n 16
  cp "$OUT" "$TMP/seeded.txt"
  ok "generate seeded again" -- "${gen[@]}" "$CHATML" --prompt "hello" -n 12 --temperature 1.2 \
     --seed 5 --top-k 20 --top-p 0.9 --min-p 0.02 --repeat-penalty 1.3 --repeat-last-n 16
  cmp -s "$OUT" "$TMP/seeded.txt" || fail "a seeded run is not repeatable"
  # prefill in chunks of 3 (the last one padded) or one token at a time: the same text
  ok "generate --batch 3" -- "${gen[@]}" "$CHATML" --prompt "hello world" -n 8 --temperature 0 --batch 3
  cmp -s "$OUT" "$TMP/greedy.txt" || fail "--batch 3 changes the greedy text"
  ok "generate --batch 1" -- "${gen[@]}" "$CHATML" --prompt "hello world" -n 8 --temperature 0 --batch 1
  cmp -s "$OUT" "$TMP/greedy.txt" || fail "--batch 1 changes the greedy text"
  ok "generate to a full context" -- "${gen[@]}" "$CHATML" --prompt "hello world" -n 50 --ctx 14 \
     --temperature 0 --verbose-prompt
  has "$ERR" "stopped at the full context" "stop reason"
  # --stop: a piece of the greedy text ends the output just before it
  ok "generate 24" -- "${gen[@]}" "$CHATML" --prompt "hello world" -n 24 --temperature 0
  full=$(head -c 200 "$OUT" | tr -d '\n')
  stop=${full:6:3}
  want=${full%%"$stop"*}
  ok "generate --stop" -- "${gen[@]}" "$CHATML" --prompt "hello world" -n 24 --temperature 0 \
     --stop "$stop" --stop "never-appears"
  got=$(tr -d '\n' < "$OUT")
  [ "$got" = "$want" ] || fail "--stop '$stop': got '$got', expected '$want'"
  has "$ERR" "stopped at a --stop string" "stop reason"
  ok "generate --chat chatml" -- "${gen[@]}" "$CHATML" --prompt "hi" -n 4 --temperature 0 --chat \
     --system "be brief" --verbose-prompt
  has "$ERR" "^<\|im_start\|>system$" "chatml system turn"
  has "$ERR" "^<\|im_start\|>assistant$" "chatml assistant opening"
  ok "generate --chat llama-3" -- "${gen[@]}" "$LLAMA3" --prompt "hi" -n 4 --temperature 0 --chat \
     --verbose-prompt
  has "$ERR" "<\|start_header_id\|>user<\|end_header_id\|>" "llama-3 user header"
  has "$ERR" "prompt \([1-3][0-9] tokens\)" "control tokens parsed (not spelled out)"
  bad "--chat without a template" 2 -- "${gen[@]}" "$TMP/llm/tiny_notemplate.gguf" --prompt hi --chat
  has "$ERR" "no chat template \(tokenizer.chat_template, chat_template in tokenizer_config.json\)" "names where a template is looked for"
  ok "--chat-template override" -- "${gen[@]}" "$TMP/llm/tiny_notemplate.gguf" --prompt hi -n 2 \
     --chat --chat-template zephyr --verbose-prompt
  has "$ERR" "^<\|user\|>$" "zephyr format"
  bad "bad --top-p" 2 -- "${gen[@]}" "$CHATML" --prompt hi --top-p 1.5
  has "$ERR" "--top-p must be in \(0, 1\]" "names the option"
  bad "bad --temperature" 2 -- "${gen[@]}" "$CHATML" --prompt hi --temperature -1
  has "$ERR" "--temperature must be >= 0" "names the option"
  bad "unknown generate option" 2 -- "${gen[@]}" "$CHATML" --prompt hi --frob
  has "$ERR" "unknown option '--frob'" "names the option"
  bad "missing --prompt" 2 -- "${gen[@]}" "$CHATML"
  has "$ERR" "missing --prompt" "says what is missing"
  bad "unknown chat family" 2 -- "${gen[@]}" "$CHATML" --prompt hi --chat-template jinja
  has "$ERR" "unknown family 'jinja'" "names the family"
  bad "prompt over the context" 2 -- "${gen[@]}" "$CHATML" --prompt "hello world" --ctx 4
  has "$ERR" "the context holds 4" "names the context"
  ok "generate --help" -- "$RLX" generate "$CHATML" --help
  has "$OUT" "no Jinja" "help says how templates are handled"
  ok "bench llm" -- "$RLX" bench "$CHATML" -p 16 -n 8 -r 2 --device cpu
  has "$OUT" "^\| model +\| +size \| +params \| type +\| backend +\| test +\| +t/s \|$" "table header"
  has "$OUT" "^\| llama 2L 64d .* F32 +\| cpu +\| pp16 +\| +[0-9.]+ ± [0-9.]+ +\|$" "pp16 row"
  has "$OUT" "^\| llama 2L 64d .* \| tg8 +\| +[0-9.]+ ± [0-9.]+ +\|$" "tg8 row"
  bad "bench nothing" 2 -- "$RLX" bench "$CHATML" -p 0 -n 0
  # GPT-2 (learned positions) and Gemma-2 (window 3 on even layers, softcaps)
  # through the same KV-cache form: greedy text repeatable and the same
  # whatever the prefill chunking; bench rows named by the arch
  for arch in gpt2 gemma2; do
    model=$TMP/llm/tiny_$arch.gguf
    ok "generate $arch" -- "${gen[@]}" "$model" --prompt "hello world" -n 12 --temperature 0
    has "$ERR" "generated 12 tokens in .* t/s" "$arch: 12 tokens"
    [ -n "$(tr -d ' \n' < "$OUT")" ] || fail "generate $arch printed no text"
    cp "$OUT" "$TMP/$arch.txt"
    for b in 3 1; do
      ok "generate $arch --batch $b" -- "${gen[@]}" "$model" --prompt "hello world" -n 12 \
         --temperature 0 --batch $b
      cmp -s "$OUT" "$TMP/$arch.txt" || fail "--batch $b changes $arch's greedy text"
    done
    ok "bench $arch" -- "$RLX" bench "$model" -p 16 -n 8 -r 2 --device cpu
    has "$OUT" "^\| $arch [23]L 64d .* \| pp16 +\| +[0-9.]+ ± [0-9.]+ +\|$" "$arch pp16 row"
    has "$OUT" "^\| $arch [23]L 64d .* \| tg8 +\| +[0-9.]+ ± [0-9.]+ +\|$" "$arch tg8 row"
  done
  bad "gpt2 past its learned positions" 1 -- "${gen[@]}" "$TMP/llm/tiny_gpt2.gguf" --prompt hi \
      --ctx 100
  has "$ERR" "learned positions end at 64" "names the limit"
  mkdir -p "$TMP/hf" && echo '{}' > "$TMP/hf/config.json"
  bad "safetensors folder without a tokenizer" 2 -- "${gen[@]}" "$TMP/hf" --prompt hi
  has "$ERR" "without tokenizer.json: give the model's vocab with --tokenizer" "says how to give a tokenizer"
fi

# Hugging Face tokenizer.json (a byte-level BPE of the 256 byte characters
# and one merge, written here)
if command -v python3 >/dev/null; then
  mkdir -p "$TMP/hftok"
  python3 - "$TMP/hftok" <<'PY'
import json, sys
keep = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or b >= 174]
chars, extra = {}, 256
for b in range(256):
    chars[b] = chr(b) if b in keep else chr(extra)
    extra += b not in keep
vocab = {chars[b]: b for b in range(256)}
vocab["Hi"] = 256
tok = {"added_tokens": [{"id": 257, "content": "<|end|>", "special": True}],
       "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
       "model": {"type": "BPE", "vocab": vocab, "merges": [["H", "i"]]}}
json.dump(tok, open(sys.argv[1] + "/tokenizer.json", "w"))
json.dump({"eos_token": "<|end|>", "chat_template": "<|im_start|>"},
          open(sys.argv[1] + "/tokenizer_config.json", "w"))
PY
  ok "tokenize an HF folder" -- "$RLX" tokenize "$TMP/hftok" "Hi there<|end|>"
  has "$OUT" "^\[256, 32, 116, 104, 101, 114, 101, 257\]$" "merge, bytes and the special token"
  ok "tokenize a tokenizer.json" -- "$RLX" tokenize "$TMP/hftok/tokenizer.json" --decode "256,32,83"
  has "$OUT" "^Hi S$" "decoded through the byte table"
  echo '{"model": {"type": "BPE", "vocab": [], "merges": []}}' > "$TMP/hftok/bad.json"
  bad "malformed tokenizer.json" 1 -- "$RLX" tokenize "$TMP/hftok/bad.json" "x"
  has "$ERR" "bad.json: 'model.vocab' must be an object" "names the file and the key"
fi

echo "cli.sh: all $checks checks passed"

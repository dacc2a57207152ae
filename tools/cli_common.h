/* Shared pieces of the rlx CLI: option parsing, graph loading, symbol
 * bindings, parameter/input initialisation, output printing and timing.
 * Every subcommand lives in its own cmd_*.c and returns an exit code:
 * CLI_OK, CLI_FAIL (the work failed: bad file, compile error...) or
 * CLI_USAGE (bad command line). Messages go to stderr. */
#ifndef RLX_TOOLS_CLI_COMMON_H
#define RLX_TOOLS_CLI_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rlx.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* ------------------------------------------------------------ subcommands */

int cmd_devices(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_dot(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_example(int argc, char** argv);
int cmd_info(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);

/* ------------------------------------------------------------ diagnostics */

/* "rlx <cmd>: message\n" on stderr. */
void cli_error(const char* cmd, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 if s is "-h" or "--help". */
int cli_is_help(const char* s);

/* -v / --verbose (main.c): let drivers talk. Without it, file descriptor 2
 * is pointed at /dev/null while devices are probed and graphs compiled, so
 * the warnings Mesa, the Vulkan loader and Dawn write there straight away do
 * not reach the user. rlx's own errors come back as messages, which the CLI
 * prints after cli_quiet_end. */
extern int cli_verbose;
/* Returns a token for cli_quiet_end (-1: nothing was silenced). */
int cli_quiet_begin(void);
void cli_quiet_end(int token);

/* ------------------------------------------------------------ option parsing */

/* Matches argv[*i] against `--name VALUE` or `--name=VALUE`. Returns 1 and
 * sets *out_value (advancing *i past a separate value) on a match, 0 if the
 * argument is another option, -1 (after printing an error) if the value is
 * missing. */
int cli_opt_value(const char* cmd, int argc, char** argv, int* i, const char* name,
                  const char** out_value);
/* Parses a whole decimal integer in [lo, hi]; prints an error naming `what`. */
int cli_parse_i64(const char* cmd, const char* what, const char* text, int64_t lo, int64_t hi,
                  int64_t* out);
int cli_parse_f64(const char* cmd, const char* what, const char* text, double* out);

/* ------------------------------------------------------------ graph + bindings */

/* Reads a graph file: .onnx through the ONNX importer, anything else as
 * rlx text. Parse errors print as "FILE:line:col: what". */
int cli_is_onnx(const char* path);
int cli_load_graph(const char* cmd, const char* path, rlx_graph** out_graph);

#define CLI_MAX_BINDINGS 32
typedef struct cli_bindings {
  int32_t n;
  char* names[CLI_MAX_BINDINGS]; /* owned */
  int64_t sizes[CLI_MAX_BINDINGS];
} cli_bindings;

void cli_bindings_free(cli_bindings* b);
/* Adds "SYM=N" (from --bind). A symbol bound twice to different sizes is an error. */
int cli_bindings_parse(const char* cmd, cli_bindings* b, const char* text);
int cli_bindings_add(const char* cmd, cli_bindings* b, const char* name, int64_t size);
/* Size bound to a symbol, or -1. */
int64_t cli_bindings_find(const cli_bindings* b, const char* name);
/* Resolves a declared type to concrete dims using the bindings; error names
 * `what` and the unbound symbol. */
int cli_concrete_shape(const char* cmd, const cli_bindings* b, const rlx_value_info* t,
                       const char* what, int64_t* out_shape);
/* "f32[4,seq]": dtype and dims, symbols by name (as the text format writes them). */
const char* cli_format_type(const rlx_value_info* t, char* buf, size_t cap);

/* ------------------------------------------------------------ elements */

/* Element i of a buffer of dtype dt, as a double / as an exact integer, and
 * the store of a double with Cast's rules (through rlx_dtype_convert). */
double cli_load_f64(const void* base, rlx_dtype dt, int64_t i);
int64_t cli_load_i64(const void* base, rlx_dtype dt, int64_t i);
void cli_store_f64(void* base, rlx_dtype dt, int64_t i, double v);

/* ------------------------------------------------------------ inputs */

/* One --input NAME=file.npy, loaded. */
typedef struct cli_input {
  char* name;  /* owned */
  char* path;  /* owned */
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data;  /* owned, from rlx_npy_load / rlx_onnx_read_tensor (rlx_free) */
  size_t bytes;
} cli_input;

#define CLI_MAX_INPUTS 64
typedef struct cli_inputs {
  int32_t n;
  cli_input items[CLI_MAX_INPUTS];
} cli_inputs;

void cli_inputs_free(cli_inputs* in);
/* Parses "NAME=file.npy" and reads the file. */
int cli_inputs_add(const char* cmd, cli_inputs* in, const char* text);
/* Checks every given input names a graph input of the right rank, and binds
 * the graph's symbolic dims from the given shapes. */
int cli_bind_from_inputs(const char* cmd, const rlx_graph* g, const cli_inputs* in,
                         cli_bindings* b);

/* ------------------------------------------------------------ compile + feed */

/* The wall time of the last cli_compile's rlx_compile (for rlx bench). */
extern double cli_last_compile_ms;

/* "a, b, c" of the graph's input (CLI_NAMES_INPUTS), param or symbol names,
 * for errors about a name that is not there; "none" for an empty list. */
enum { CLI_NAMES_INPUTS, CLI_NAMES_PARAMS, CLI_NAMES_SYMBOLS };
const char* cli_graph_names(const rlx_graph* g, int which, char* buf, size_t cap);
/* Sets the given inputs and random data (from seed) for every other input. */
int cli_set_inputs(const char* cmd, const rlx_graph* g, rlx_exec* e, const cli_bindings* b,
                   const cli_inputs* given, uint64_t seed);

/* ------------------------------------------------------------ the usual flow */

/* Options shared by run, bench and generate: where to compile, how to bind
 * symbols, and where params and inputs come from. */
typedef struct cli_model_opts {
  const char* file;
  const char* device;     /* default "cpu" */
  int strict;
  int tf32; /* --tf32: rlx_compile_options.allow_tf32 */
  uint64_t seed;          /* random inputs */
  uint64_t init_seed;     /* param init (--random-params / --init-params) */
  int random_params;      /* params without a value may be made up */
  const char* params_dir; /* --params DIR, or NULL */
  int32_t threads;        /* --threads: CPU worker threads, 0 = all cores */
  cli_bindings bindings;
  cli_inputs inputs;
  int32_t precision; /* --precision: rlx_compile_options.precision */
  int channels_last; /* --channels-last: rlx_compile_options.channels_last */
} cli_model_opts;

/* Compiles g for o->device with o's bindings as symbol sizes and o's
 * compile options (--strict, --tf32, --threads, --precision). */
int cli_compile(const char* cmd, rlx_graph* g, const cli_model_opts* o, rlx_exec** out_exec);

void cli_model_opts_init(cli_model_opts* o);
void cli_model_opts_free(cli_model_opts* o);
/* --precision's value: bf16, f16 or f32 (RLX_PRECISION_DEFAULT) into *out;
 * CLI_OK or CLI_USAGE (printed). */
int cli_parse_precision(const char* cmd, const char* v, int32_t* out);
/* Consumes argv[*i] if it is one of --device --strict --tf32 --precision
 * --seed --random-params --init-params --params --bind --input --threads
 * (only those whose bit is in
 * `accept`). Returns 1 if consumed, 0 if not one of them, or -CLI_USAGE /
 * -CLI_FAIL on a bad value. */
enum {
  CLI_OPT_DEVICE = 1, CLI_OPT_STRICT = 2, CLI_OPT_SEED = 4, CLI_OPT_INIT = 8,
  CLI_OPT_PARAMS = 16, CLI_OPT_BIND = 32, CLI_OPT_INPUT = 64, CLI_OPT_THREADS = 128,
  CLI_OPT_ALL = 255
};
int cli_model_opt(const char* cmd, int argc, char** argv, int* i, unsigned accept,
                  cli_model_opts* o);
/* Help text for the options above (the ones in `accept`). */
void cli_model_opts_help(FILE* f, unsigned accept);
/* Sets every param of the compiled graph, in this order: the initializers of
 * onnx_path (when not NULL; frozen inputs as given to the importer), then
 * DIR/<name>.npy for each param that has one. A param left without a value
 * is an error naming it, unless o->random_params, when it is made up by the
 * init rule (cli_model_opts_help) and one line on stderr says how many. */
int cli_set_params(const char* cmd, const rlx_graph* g, rlx_exec* e, const cli_model_opts* o,
                   const char* onnx_path, const rlx_onnx_frozen_input* frozen,
                   int32_t n_frozen);

/* Load FILE, bind symbols (--bind, then --input shapes), compile, set params
 * (and, when set_inputs, every input). On failure everything is freed. */
int cli_prepare(const char* cmd, cli_model_opts* o, int set_inputs, rlx_graph** out_graph,
                rlx_exec** out_exec);

/* ------------------------------------------------------------ deterministic RNG */

/* 64-bit hash of a string mixed with a seed (FNV-1a then splitmix finaliser). */
uint64_t cli_hash_name(const char* name, uint64_t seed);
/* splitmix64 step. */
uint64_t cli_rng_next(uint64_t* state);
/* Uniform in [0, 1). */
double cli_rng_uniform(uint64_t* state);
/* Standard normal (Box-Muller). */
double cli_rng_normal(uint64_t* state);

/* ------------------------------------------------------------ outputs */

/* Label of graph output i: the producer's label, else "out<i>". */
const char* cli_output_name(const rlx_graph* g, int32_t i, char* buf, size_t cap);
/* Prints every output: name, dtype, shape, first values, checksum. */
int cli_print_outputs(const char* cmd, const rlx_graph* g, const rlx_exec* e);
/* Writes out<i>.npy for every output into dir (bf16 is saved as f32: npy has no bf16). */
int cli_save_outputs(const char* cmd, const rlx_exec* e, const char* dir);
/* Prints rlx_exec_report to stdout. */
int cli_print_report(const char* cmd, const rlx_exec* e);

/* A JSON string (quotes, escapes) on stdout. */
void cli_print_json_string(const char* s);

/* ------------------------------------------------------------ time */

/* Milliseconds on CLOCK_MONOTONIC. */
double cli_now_ms(void);
/* q-quantile (0..1) of n samples (sorts in place, nearest-rank with interpolation). */
double cli_quantile(double* samples, int n, double q);

#endif

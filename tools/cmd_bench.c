/* rlx bench: wall-clock latency of rlx_exec_run on one graph, with the
 * compile time and the memory it took. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli_common.h"
#include "llm_cli.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx bench FILE [options]\n"
          "       rlx bench MODEL.gguf [-p N] [-n N] [-r REPS]   (see rlx bench MODEL.gguf --help)\n"
          "\n"
          "Compiles FILE, feeds params and inputs as `rlx run` does, runs it --warmup\n"
          "times untimed, then --iters times, each timed alone on CLOCK_MONOTONIC\n"
          "(rlx_exec_run only: no upload or readback of the caller's data). Reports:\n"
          "  compile     wall time of rlx_compile, and of the first (warmup) run\n"
          "  latency     min / median / mean / p99 / max and standard deviation (ms)\n"
          "  throughput  runs per second (1000 / mean)\n"
          "  memory      the device arena (rlx_exec_memory_stats) and the process's\n"
          "              peak resident set (getrusage), in bytes\n"
          "The default output is a readable summary followed by one JSON line (the\n"
          "same fields as -o json); -o picks one machine-readable form alone.\n"
          "\n"
          "options:\n"
          "  --warmup N          untimed runs first (default 3)\n"
          "  --iters N           timed runs (default 20)\n"
          "  -o, --output FMT    json (one object), csv (header + row) or md (a\n"
          "                      Markdown table); default: summary + JSON line\n"
          "  --trace FILE        write a per-step Chrome trace (Perfetto) of every\n"
          "                      run to FILE (rlx_exec_set_trace); tracing slows the\n"
          "                      runs, so the latencies are then not the product's\n");
  cli_model_opts_help(f, CLI_OPT_ALL);
}

/* Everything one bench reports. */
typedef struct bench_result {
  const char* file;
  const char* device;
  int iters, warmup, threads;
  double compile_ms, first_run_ms;
  double min_ms, median_ms, mean_ms, p10_ms, p90_ms, p99_ms, max_ms, stddev_ms, runs_per_s;
  unsigned long long arena_bytes, tensor_bytes, peak_rss_bytes;
} bench_result;

enum { FMT_DEFAULT, FMT_JSON, FMT_CSV, FMT_MD };

static int parse_format(const char* cmd, const char* v, int* out) {
  if (strcmp(v, "json") == 0) *out = FMT_JSON;
  else if (strcmp(v, "csv") == 0) *out = FMT_CSV;
  else if (strcmp(v, "md") == 0) *out = FMT_MD;
  else {
    cli_error(cmd, "-o: unknown format '%s' (json, csv or md)", v);
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* Warmup then timed runs; the first run's time is kept apart (it may build
 * what compile left for the first binding). */
static int time_runs(const char* cmd, rlx_exec* e, const char* file, int64_t warmup,
                     int64_t iters, double* samples, double* first_ms) {
  for (int64_t k = 0; k < warmup + iters; k++) {
    double t0 = cli_now_ms();
    if (rlx_exec_run(e) != RLX_OK) {
      cli_error(cmd, "%s: run %lld failed: %s", file, (long long)k, rlx_exec_last_error(e));
      return CLI_FAIL;
    }
    double ms = cli_now_ms() - t0;
    if (k == 0) *first_ms = ms;
    if (k >= warmup) samples[k - warmup] = ms;
  }
  return CLI_OK;
}

static void summarize(double* samples, int n, bench_result* r) {
  double sum = 0, sq = 0;
  for (int i = 0; i < n; i++) sum += samples[i];
  r->mean_ms = sum / n;
  for (int i = 0; i < n; i++) sq += (samples[i] - r->mean_ms) * (samples[i] - r->mean_ms);
  r->stddev_ms = n > 1 ? sqrt(sq / (n - 1)) : 0.0;
  r->median_ms = cli_quantile(samples, n, 0.5); /* sorts: min and max follow */
  r->p10_ms = cli_quantile(samples, n, 0.1);
  r->p90_ms = cli_quantile(samples, n, 0.9);
  r->p99_ms = cli_quantile(samples, n, 0.99);
  r->min_ms = samples[0];
  r->max_ms = samples[n - 1];
  r->runs_per_s = r->mean_ms > 0 ? 1000.0 / r->mean_ms : 0.0;
}

static void measure_memory(const rlx_exec* e, bench_result* r) {
  rlx_memory_stats m;
  if (rlx_exec_memory_stats(e, &m) == RLX_OK) {
    r->arena_bytes = m.arena_bytes;
    r->tensor_bytes = m.tensor_bytes;
  }
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) r->peak_rss_bytes = (unsigned long long)ru.ru_maxrss * 1024;
}

/* ------------------------------------------------------------ output */

/* Field names, shared by JSON, CSV and Markdown (same order everywhere). */
#define BENCH_NUMBERS(X)                                                       \
  X("compile_ms", "%.3f", r->compile_ms) X("first_run_ms", "%.4f", r->first_run_ms) \
  X("min_ms", "%.4f", r->min_ms) X("median_ms", "%.6f", r->median_ms)          \
  X("mean_ms", "%.6f", r->mean_ms) X("p10_ms", "%.6f", r->p10_ms)              \
  X("p90_ms", "%.6f", r->p90_ms) X("p99_ms", "%.6f", r->p99_ms)                \
  X("max_ms", "%.4f", r->max_ms) X("stddev_ms", "%.6f", r->stddev_ms)          \
  X("runs_per_s", "%.3f", r->runs_per_s) X("arena_bytes", "%llu", r->arena_bytes) \
  X("tensor_bytes", "%llu", r->tensor_bytes) X("peak_rss_bytes", "%llu", r->peak_rss_bytes)

static void print_json(const bench_result* r) {
  printf("{\"name\": ");
  cli_print_json_string(r->file);
  printf(", \"device\": \"%s\", \"iters\": %d, \"warmup\": %d, \"threads\": %d", r->device,
         r->iters, r->warmup, r->threads);
#define X(name, fmt, value) printf(", \"" name "\": " fmt, value);
  BENCH_NUMBERS(X)
#undef X
  printf("}\n");
}

/* The file name is quoted when CSV needs it. */
static void print_csv(const bench_result* r) {
  printf("name,device,iters,warmup,threads");
#define X(name, fmt, value) printf("," name);
  BENCH_NUMBERS(X)
#undef X
  int quote = strpbrk(r->file, ",\"\n") != NULL;
  printf("\n%s", quote ? "\"" : "");
  for (const char* p = r->file; *p; p++) {
    if (*p == '"') putchar('"'); /* CSV doubles a quote */
    putchar(*p);
  }
  printf("%s,%s,%d,%d,%d", quote ? "\"" : "", r->device, r->iters, r->warmup, r->threads);
#define X(name, fmt, value) printf("," fmt, value);
  BENCH_NUMBERS(X)
#undef X
  printf("\n");
}

static void print_md(const bench_result* r) {
  printf("| name | device | iters | warmup | threads");
#define X(name, fmt, value) printf(" | " name);
  BENCH_NUMBERS(X)
#undef X
  printf(" |\n|---|---|---|---|---");
#define X(name, fmt, value) printf("|---");
  BENCH_NUMBERS(X)
#undef X
  printf("|\n| ");
  for (const char* p = r->file; *p; p++) {
    if (*p == '|') putchar('\\'); /* a bar would end the cell */
    putchar(*p);
  }
  printf(" | %s | %d | %d | %d", r->device, r->iters, r->warmup, r->threads);
#define X(name, fmt, value) printf(" | " fmt, value);
  BENCH_NUMBERS(X)
#undef X
  printf(" |\n");
}

static double mib(unsigned long long bytes) { return (double)bytes / (1024.0 * 1024.0); }

static void print_summary(const bench_result* r) {
  printf("%s on %s: %d iters, median %.4f ms, p10 %.4f ms, p90 %.4f ms\n", r->file, r->device,
         r->iters, r->median_ms, r->p10_ms, r->p90_ms);
  printf("  compile     %.2f ms, first run %.3f ms (%d warmup runs, threads %d%s)\n",
         r->compile_ms, r->first_run_ms, r->warmup, r->threads, r->threads ? "" : " = all cores");
  printf("  latency     min %.4f  median %.4f  mean %.4f  p99 %.4f  max %.4f  stddev %.4f ms\n",
         r->min_ms, r->median_ms, r->mean_ms, r->p99_ms, r->max_ms, r->stddev_ms);
  printf("  throughput  %.1f runs/s\n", r->runs_per_s);
  printf("  memory      arena %.2f MiB (tensors %.2f MiB), host peak RSS %.1f MiB\n",
         mib(r->arena_bytes), mib(r->tensor_bytes), mib(r->peak_rss_bytes));
  print_json(r);
}

/* ------------------------------------------------------------ command */

typedef struct bench_args {
  cli_model_opts model;
  int64_t warmup, iters;
  int format;
  const char* trace; /* --trace FILE, or NULL */
} bench_args;

static int parse_args(const char* cmd, int argc, char** argv, bench_args* a, int* out_help) {
  int rc = CLI_OK;
  for (int i = 1; i < argc && rc == CLI_OK; i++) {
    const char* v = NULL;
    int m = cli_model_opt(cmd, argc, argv, &i, CLI_OPT_ALL, &a->model);
    if (m < 0) {
      rc = -m;
    } else if (m > 0) {
      continue;
    } else if (cli_is_help(argv[i])) {
      *out_help = 1;
      return CLI_OK;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--warmup", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--warmup", v, 0, 1000000, &a->warmup);
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--iters", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : cli_parse_i64(cmd, "--iters", v, 1, 1000000, &a->iters);
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "-o", &v)) != 0 ||
               (m = cli_opt_value(cmd, argc, argv, &i, "--output", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : parse_format(cmd, v, &a->format);
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--trace", &v)) != 0) {
      rc = m < 0 ? CLI_USAGE : CLI_OK;
      a->trace = v;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      cli_error(cmd, "unknown option '%s' (see rlx bench --help)", argv[i]);
      rc = CLI_USAGE;
    } else if (a->model.file) {
      cli_error(cmd, "more than one FILE ('%s' and '%s')", a->model.file, argv[i]);
      rc = CLI_USAGE;
    } else {
      a->model.file = argv[i];
    }
  }
  if (rc == CLI_OK && !a->model.file) {
    cli_error(cmd, "missing FILE");
    usage(stderr);
    rc = CLI_USAGE;
  }
  return rc;
}

static void report(const bench_args* a, bench_result* r) {
  if (a->format == FMT_JSON) print_json(r);
  else if (a->format == FMT_CSV) print_csv(r);
  else if (a->format == FMT_MD) print_md(r);
  else print_summary(r);
}

int cmd_bench(int argc, char** argv) {
  const char* cmd = "bench";
  if (llm_cli_names_llm(argc, argv)) return cmd_bench_llm(argc, argv);
  bench_args a = {.warmup = 3, .iters = 20, .format = FMT_DEFAULT};
  cli_model_opts_init(&a.model);
  int help = 0;
  int rc = parse_args(cmd, argc, argv, &a, &help);
  if (help) {
    usage(stdout);
    cli_model_opts_free(&a.model);
    return CLI_OK;
  }
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  double* samples = NULL;
  bench_result r;
  memset(&r, 0, sizeof r);
  if (rc == CLI_OK) rc = cli_prepare(cmd, &a.model, 1, &g, &e);
  r.compile_ms = cli_last_compile_ms;
  if (rc == CLI_OK && a.trace && rlx_exec_set_trace(e, a.trace) != RLX_OK) {
    cli_error(cmd, "--trace: %s", rlx_exec_last_error(e));
    rc = CLI_FAIL;
  }
  if (rc == CLI_OK && !(samples = malloc((size_t)a.iters * sizeof *samples))) {
    cli_error(cmd, "out of memory");
    rc = CLI_FAIL;
  }
  if (rc == CLI_OK)
    rc = time_runs(cmd, e, a.model.file, a.warmup, a.iters, samples, &r.first_run_ms);
  if (rc == CLI_OK) {
    r.file = a.model.file;
    r.device = a.model.device;
    rlx_device_resolve(a.model.device, &r.device);
    r.iters = (int)a.iters;
    r.warmup = (int)a.warmup;
    r.threads = a.model.threads;
    summarize(samples, r.iters, &r);
    measure_memory(e, &r);
    report(&a, &r);
  }
  free(samples);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  cli_model_opts_free(&a.model);
  return rc;
}

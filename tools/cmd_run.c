/* rlx run: compile a graph, feed it, run it once, print or save the outputs. */
#include <stdio.h>
#include <string.h>

#include "cli_common.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx run FILE [options]\n"
          "\n"
          "Compiles FILE (a graph in the rlx text format, or an ONNX model .onnx whose\n"
          "initializers become the params), feeds every input (from --input or random),\n"
          "runs it once and prints each output: index, name, dtype, shape, the first\n"
          "values and checksums (sum and sum of absolute values).\n"
          "\n"
          "options:\n");
  cli_model_opts_help(f, CLI_OPT_ALL);
  fprintf(f,
          "  --save DIR          also write output i to DIR/out<i>.npy (bf16/f16 as f32)\n"
          "  --report            print the dispatch report (native / fused / decomposed /\n"
          "                      host fallback per op kind, arena bytes, launches)\n");
}

int cmd_run(int argc, char** argv) {
  const char* cmd = "run";
  cli_model_opts o;
  cli_model_opts_init(&o);
  const char* save_dir = NULL;
  int report = 0, rc = CLI_OK;
  for (int i = 1; i < argc && rc == CLI_OK; i++) {
    const char* v = NULL;
    int m = cli_model_opt(cmd, argc, argv, &i, CLI_OPT_ALL, &o);
    if (m < 0) {
      rc = -m;
    } else if (m > 0) {
      continue;
    } else if (cli_is_help(argv[i])) {
      usage(stdout);
      cli_model_opts_free(&o);
      return CLI_OK;
    } else if (strcmp(argv[i], "--report") == 0) {
      report = 1;
    } else if ((m = cli_opt_value(cmd, argc, argv, &i, "--save", &v)) != 0) {
      if (m < 0) rc = CLI_USAGE;
      save_dir = v;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      cli_error(cmd, "unknown option '%s' (see rlx run --help)", argv[i]);
      rc = CLI_USAGE;
    } else if (o.file) {
      cli_error(cmd, "more than one FILE ('%s' and '%s')", o.file, argv[i]);
      rc = CLI_USAGE;
    } else {
      o.file = argv[i];
    }
  }
  if (rc == CLI_OK && !o.file) {
    cli_error(cmd, "missing FILE");
    usage(stderr);
    rc = CLI_USAGE;
  }
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  if (rc == CLI_OK) rc = cli_prepare(cmd, &o, 1, &g, &e);
  if (rc == CLI_OK && rlx_exec_run(e) != RLX_OK) {
    cli_error(cmd, "%s: run failed: %s", o.file, rlx_exec_last_error(e));
    rc = CLI_FAIL;
  }
  if (rc == CLI_OK) rc = cli_print_outputs(cmd, g, e);
  if (rc == CLI_OK && save_dir) rc = cli_save_outputs(cmd, e, save_dir);
  if (rc == CLI_OK && report) rc = cli_print_report(cmd, e);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  cli_model_opts_free(&o);
  return rc;
}

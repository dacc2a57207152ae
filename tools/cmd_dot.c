/* rlx dot: Graphviz view of a graph as written, or as the compiler left it. */
#include <stdio.h>
#include <string.h>

#include "cli_common.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx dot FILE [--after] [--device NAME] [--bind SYM=N ...] [--strict]\n"
          "\n"
          "Prints FILE as a Graphviz digraph (render with `dot -Tsvg`). With --after,\n"
          "FILE is first compiled for the device and the graph after the passes\n"
          "(decomposition, fusion) is drawn instead; a graph with symbolic dims needs\n"
          "them bound with --bind to compile.\n"
          "\n"
          "options:\n"
          "  --after             draw the graph after compilation passes\n");
  cli_model_opts_help(f, CLI_OPT_DEVICE | CLI_OPT_BIND | CLI_OPT_STRICT);
}

static int print_dot(const char* cmd, const rlx_graph* g, const char* title) {
  char* text = NULL;
  if (rlx_graph_print_dot(g, title, &text) != RLX_OK) {
    cli_error(cmd, "cannot draw the graph: %s", rlx_graph_last_error(g));
    return CLI_FAIL;
  }
  fputs(text, stdout);
  rlx_free(text);
  return CLI_OK;
}

static int dot_after_passes(const char* cmd, cli_model_opts* o, rlx_graph* g) {
  rlx_exec* e = NULL;
  if (cli_compile(cmd, g, o->device, o->strict, o->tf32, o->channels_last, o->threads,
                  &o->bindings, &e) != CLI_OK) return CLI_FAIL;
  const char* device = o->device;
  rlx_device_resolve(o->device, &device);
  char title[1024];
  snprintf(title, sizeof title, "%s after passes (%s)", o->file, device);
  char* text = NULL;
  int rc = CLI_OK;
  if (rlx_exec_print_dot(e, title, &text) != RLX_OK) {
    cli_error(cmd, "%s: no compiled graph yet (bind every symbolic dim with --bind)", o->file);
    rc = CLI_FAIL;
  } else {
    fputs(text, stdout);
  }
  rlx_free(text);
  rlx_exec_destroy(e);
  return rc;
}

int cmd_dot(int argc, char** argv) {
  const char* cmd = "dot";
  const unsigned accept = CLI_OPT_DEVICE | CLI_OPT_BIND | CLI_OPT_STRICT;
  cli_model_opts o;
  cli_model_opts_init(&o);
  int after = 0, rc = CLI_OK;
  for (int i = 1; i < argc && rc == CLI_OK; i++) {
    int m = cli_model_opt(cmd, argc, argv, &i, accept, &o);
    if (m < 0) {
      rc = -m;
    } else if (m > 0) {
      continue;
    } else if (cli_is_help(argv[i])) {
      usage(stdout);
      cli_model_opts_free(&o);
      return CLI_OK;
    } else if (strcmp(argv[i], "--after") == 0) {
      after = 1;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      cli_error(cmd, "unknown option '%s' (see rlx dot --help)", argv[i]);
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
  if (rc == CLI_OK) rc = cli_load_graph(cmd, o.file, &g);
  if (rc == CLI_OK) rc = after ? dot_after_passes(cmd, &o, g) : print_dot(cmd, g, o.file);
  rlx_graph_destroy(g);
  cli_model_opts_free(&o);
  return rc;
}

/* rlx: command-line front end. One subcommand per file (cmd_*.c). */
#include <stdio.h>
#include <string.h>

#include "cli_common.h"

typedef struct command {
  const char* name;
  int (*fn)(int argc, char** argv);
  const char* summary;
} command;

static const command k_commands[] = {
    {"devices", cmd_devices, "list backends and whether each can run here"},
    {"run", cmd_run, "compile and run a graph, print or save its outputs"},
    {"bench", cmd_bench, "time runs of a graph: median/p10/p90 latency"},
    {"dot", cmd_dot, "Graphviz view of a graph, as parsed or after passes"},
    {"generate", cmd_generate, "greedy/sampled token generation with a GPT-style graph"},
    {"example", cmd_example, "print a bundled example graph (gpt) in the text format"},
};
enum { N_COMMANDS = sizeof k_commands / sizeof k_commands[0] };

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx <command> [options]\n"
          "\n"
          "commands:\n");
  for (int i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %-9s %s\n", k_commands[i].name, k_commands[i].summary);
  fprintf(f,
          "\n"
          "`rlx <command> --help` describes a command's options;\n"
          "`rlx --version` prints the version and what was built in.\n"
          "Graphs are files in the rlx text format (.rlx); try\n"
          "  rlx example gpt > gpt.rlx && rlx generate gpt.rlx --prompt 1,2,3\n");
}

/* `rlx --version`: the library's version, the backends compiled into it
 * (built in is not available: `rlx devices` says which can run here) and
 * whether the ONNX importer is. */
static int print_version(void) {
  printf("rlx %s\n", rlx_version());
  printf("backends built in:");
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info d;
    if (rlx_device_get(i, &d) == RLX_OK && strcmp(d.detail, "not built") != 0)
      printf(" %s", d.name);
  }
  printf("\n");
  /* Without protobuf-c the importer answers UNIMPLEMENTED before it looks
   * at the file (rlx.h); a built one fails to open "" instead. */
  rlx_graph* g = NULL;
  rlx_status s = rlx_onnx_load("", &g, NULL);
  rlx_graph_destroy(g);
  printf("onnx import: %s\n", s == RLX_UNIMPLEMENTED ? "not built" : "built");
  return CLI_OK;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  const char* name = argv[1];
  if (strcmp(name, "--version") == 0) return print_version();
  if (strcmp(name, "help") == 0 || cli_is_help(name)) {
    if (argc >= 3) {
      /* `rlx help run` is `rlx run --help`. */
      for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[2], k_commands[i].name) == 0) {
          char help[] = "--help";
          char* args[3] = {argv[2], help, NULL};
          return k_commands[i].fn(2, args);
        }
      fprintf(stderr, "rlx: unknown command '%s'\n", argv[2]);
      return CLI_USAGE;
    }
    usage(stdout);
    return CLI_OK;
  }
  for (int i = 0; i < N_COMMANDS; i++)
    if (strcmp(name, k_commands[i].name) == 0) return k_commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "rlx: unknown command '%s'\n\n", name);
  usage(stderr);
  return CLI_USAGE;
}

/* rlx: command-line front end. One subcommand per file (cmd_*.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

typedef struct command {
  const char* name;
  int (*fn)(int argc, char** argv);
  const char* summary;
} command;

static const command k_commands[] = {
    {"devices", cmd_devices, "list backends and whether each can run here"},
    {"info", cmd_info, "inputs, params, outputs and ops of a graph, and which devices run each op"},
    {"run", cmd_run, "compile and run a graph, print or save its outputs"},
    {"bench", cmd_bench, "time runs of a graph: compile time, latency stats, memory"},
    {"dot", cmd_dot, "Graphviz view of a graph, as parsed or after passes"},
    {"generate", cmd_generate, "greedy/sampled token generation with a GPT-style graph"},
    {"example", cmd_example, "print a bundled example graph (gpt) in the text format"},
    {"train", cmd_train, "train the built-in GPT on a text, or fine-tune an ONNX model"},
    {"tokenize", cmd_tokenize, "token ids of a text under a GGUF model's tokenizer (--decode back)"},
};
enum { N_COMMANDS = sizeof k_commands / sizeof k_commands[0] };

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx [-v] <command> [options]\n"
          "\n"
          "commands:\n");
  for (int i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %-9s %s\n", k_commands[i].name, k_commands[i].summary);
  fprintf(f,
          "\n"
          "-v, --verbose (anywhere on the line): let GPU drivers (Mesa, the Vulkan\n"
          "loader, Dawn) print their warnings, and Dawn its log; by default they are\n"
          "silenced while devices start. rlx's own errors are always printed.\n"
          "\n"
          "`rlx <command> --help` describes a command's options;\n"
          "`rlx --version` prints the version and what was built in.\n"
          "Graphs are files in the rlx text format (.rlx); try\n"
          "  rlx example gpt > gpt.rlx && rlx generate gpt.rlx --random-params --prompt 1,2,3\n"
          "(--random-params: the example has no checkpoint, so its weights are made up).\n");
}

/* Takes -v / --verbose out of argv wherever it is (every command accepts
 * it), so the commands never see it. */
static int take_verbose(int* argc, char** argv) {
  int verbose = 0, kept = 1;
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], "-v") == 0 || strcmp(argv[i], "--verbose") == 0) verbose = 1;
    else argv[kept++] = argv[i];
  }
  argv[kept] = NULL;
  *argc = kept;
  return verbose;
}

/* `rlx --version`: the library's version, the backends compiled into it
 * (built in is not available: `rlx devices` says which can run here) and
 * whether the ONNX importer is. */
static int print_version(void) {
  printf("rlx %s\n", rlx_version());
  printf("backends built in:");
  int quiet = cli_quiet_begin(); /* rlx_device_get starts the drivers */
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info d;
    if (rlx_device_get(i, &d) == RLX_OK && strcmp(d.detail, "not built") != 0)
      printf(" %s", d.name);
  }
  cli_quiet_end(quiet);
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
  cli_verbose = take_verbose(&argc, argv);
  /* Dawn's own log goes through the library's switch (docs/ENV.md). */
  if (cli_verbose) setenv("RLX_WG_VERBOSE", "1", 0);
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

/* rlx train: two modes with one progress bar, log and checkpoint style.
 *   rlx train --text FILE ...      the built-in GPT on a text's bytes (train_text.c)
 *   rlx train MODEL.onnx ...       fine-tune an exported model (train_onnx.c) */
#include <stdio.h>
#include <string.h>

#include "cli_common.h"
#include "train_util.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: rlx train --text FILE [options]     train the built-in GPT on a text\n"
          "       rlx train MODEL.onnx [options]      fine-tune an exported model\n"
          "\n"
          "`rlx train --text --help` and `rlx train MODEL.onnx --help` list the options.\n");
}

int cmd_train(int argc, char** argv) {
  int text = 0, positional = 0, help = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--text") == 0 || strncmp(argv[i], "--text=", 7) == 0)
      text = 1;
    else if (cli_is_help(argv[i]))
      help = 1;
    else if (argv[i][0] != '-')
      positional = 1;
  }
  if (text) return cmd_train_text(argc, argv);
  if (positional) return cmd_train_onnx(argc, argv);
  if (help) {
    usage(stdout);
    return CLI_OK;
  }
  cli_error("train", "expected --text FILE or a MODEL.onnx");
  usage(stderr);
  return CLI_USAGE;
}

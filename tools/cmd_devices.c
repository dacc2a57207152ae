/* rlx devices: what this build can run on, and why not where it cannot. */
#include <stdio.h>

#include "cli_common.h"

static const char k_usage[] =
    "usage: rlx devices\n"
    "\n"
    "Lists every backend, one per line: its name, then \"available: ...\",\n"
    "\"not built\" (left out of this build) or \"unavailable: <reason>\"\n"
    "(built, but no driver or device here).\n";

int cmd_devices(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (cli_is_help(argv[i])) {
      fputs(k_usage, stdout);
      return CLI_OK;
    }
    cli_error("devices", "unexpected argument '%s'", argv[i]);
    fputs(k_usage, stderr);
    return CLI_USAGE;
  }
  int32_t n = rlx_device_count();
  for (int32_t i = 0; i < n; i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) != RLX_OK) {
      cli_error("devices", "cannot query device %d", (int)i);
      return CLI_FAIL;
    }
    printf("%-7s %s\n", info.name, info.detail);
  }
  return CLI_OK;
}

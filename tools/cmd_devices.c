/* rlx devices: what this build can run on, and why not where it cannot. */
#include <stdio.h>
#include <string.h>

#include "cli_common.h"

static const char k_usage[] =
    "usage: rlx devices\n"
    "\n"
    "Lists every backend, one per line: its name, then \"available: ...\",\n"
    "\"available (software: ...)\" (an emulated device such as lavapipe: it\n"
    "works, but is slower than the cpu backend, so --device best skips it),\n"
    "\"not built\" (left out of this build) or \"unavailable: <reason>\"\n"
    "(built, but no driver or device here). Driver warnings printed while the\n"
    "devices start are silenced unless -v.\n";

/* "available: what" -> "available (software: what)" for emulated devices. */
static void print_device(const rlx_device_info* info) {
  const char* prefix = "available: ";
  size_t n = strlen(prefix);
  if (info->software && strncmp(info->detail, prefix, n) == 0)
    printf("%-7s available (software: %s)\n", info->name, info->detail + n);
  else if (info->software)
    printf("%-7s %s (software)\n", info->name, info->detail);
  else
    printf("%-7s %s\n", info->name, info->detail);
}

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
    int quiet = cli_quiet_begin(); /* the first query starts the driver */
    rlx_status s = rlx_device_get(i, &info);
    cli_quiet_end(quiet);
    if (s != RLX_OK) {
      cli_error("devices", "cannot query device %d", (int)i);
      return CLI_FAIL;
    }
    print_device(&info);
  }
  return CLI_OK;
}

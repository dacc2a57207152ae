#include "base/error.h"

#include <stdio.h>

rlx_status rlx_fail(rlx_error* err, rlx_status status, const char* fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return status;
}

void rlx_error_clear(rlx_error* err) {
  if (err) err->msg[0] = '\0';
}

const char* rlx_status_name(rlx_status s) {
  switch (s) {
    case RLX_OK: return "OK";
    case RLX_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case RLX_NOT_FOUND: return "NOT_FOUND";
    case RLX_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case RLX_UNAVAILABLE: return "UNAVAILABLE";
    case RLX_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case RLX_OUT_OF_RANGE: return "OUT_OF_RANGE";
    case RLX_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case RLX_INTERNAL: return "INTERNAL";
  }
  return "UNKNOWN";
}

/* Error messages carried by the object that failed (graph, executable). */
#ifndef RLX_BASE_ERROR_H
#define RLX_BASE_ERROR_H

#include <stdarg.h>
#include "rlx.h"

typedef struct rlx_error {
  char msg[1024];
} rlx_error;

/* Formats the message into err (may be NULL) and returns status. */
rlx_status rlx_fail(rlx_error* err, rlx_status status, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
void rlx_error_clear(rlx_error* err);

#define RLX_RETURN_IF_ERROR(expr)         \
  do {                                    \
    rlx_status rlx_s_ = (expr);           \
    if (rlx_s_ != RLX_OK) return rlx_s_;  \
  } while (0)

/* Allocation helpers that fail with RESOURCE_EXHAUSTED instead of aborting. */
#define RLX_CHECK_ALLOC(err, p) \
  do { if (!(p)) return rlx_fail((err), RLX_RESOURCE_EXHAUSTED, "out of host memory"); } while (0)

#endif

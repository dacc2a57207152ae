#include "base/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rlx_buf_reserve(rlx_buf* b, size_t extra) {
  if (b->oom || b->n + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->n + extra + 1) cap *= 2;
  char* p = realloc(b->p, cap);
  if (!p) { b->oom = 1; return; }
  b->p = p;
  b->cap = cap;
}

void rlx_buf_add(rlx_buf* b, const void* data, size_t n) {
  rlx_buf_reserve(b, n);
  if (b->oom) return;
  if (n) memcpy(b->p + b->n, data, n);
  b->n += n;
  b->p[b->n] = '\0';
}

void rlx_buf_puts(rlx_buf* b, const char* s) { rlx_buf_add(b, s, strlen(s)); }

void rlx_buf_printf(rlx_buf* b, const char* fmt, ...) {
  char small[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) { b->oom = 1; return; }
  if ((size_t)n < sizeof small) { rlx_buf_add(b, small, (size_t)n); return; }
  rlx_buf_reserve(b, (size_t)n); /* longer: format again, straight into the buffer */
  if (b->oom) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)n;
}

void rlx_buf_free(rlx_buf* b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

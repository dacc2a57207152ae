/* A growable byte buffer: the one builder behind the text printer, the
 * Graphviz printer, compile-cache keys and WebGPU shader sources. p stays
 * NUL-terminated (text builders hand it out as a string); a failed growth
 * sets oom, later appends do nothing, and the caller checks oom once. */
#ifndef RLX_BASE_BUF_H
#define RLX_BASE_BUF_H

#include <stddef.h>

typedef struct rlx_buf {
  char* p;
  size_t n, cap;
  int oom;
} rlx_buf;

/* Room for `extra` more bytes (plus the NUL) without reallocating. */
void rlx_buf_reserve(rlx_buf* b, size_t extra);
void rlx_buf_add(rlx_buf* b, const void* data, size_t n);
void rlx_buf_puts(rlx_buf* b, const char* s);
__attribute__((format(printf, 2, 3))) void rlx_buf_printf(rlx_buf* b, const char* fmt, ...);
void rlx_buf_free(rlx_buf* b);

#endif

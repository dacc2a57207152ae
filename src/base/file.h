/* Reading the files users hand the loaders (graph text, ONNX models and
 * their external data, .npy): the one place that opens them.
 *
 * Only regular files are read. A FIFO would block the open (and then the
 * read) until some writer comes, /dev/zero never ends, a directory fails
 * late with a confusing message: each is refused before the first read,
 * with the path and what the file is. Reads are bounded by the size fstat
 * reported when the file was opened (and by the caller's limit), so a file
 * that grows while it is read cannot make the reader allocate without end.
 * Errors name the path and, for the OS's failures, strerror(errno). */
#ifndef RLX_BASE_FILE_H
#define RLX_BASE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* Opens path for reading; *out_fd is an open descriptor of a regular file
 * of *out_size bytes. what ("ONNX model", "npy", ...) starts the messages.
 * NOT_FOUND when the file cannot be opened, INVALID_ARGUMENT when it is not
 * a regular file. */
rlx_status rlx_file_open_regular(const char* path, const char* what, int* out_fd,
                                 int64_t* out_size, rlx_error* err);

/* The whole file in a malloc'd buffer with one NUL byte after its *out_n
 * bytes (so text can be parsed in place); free(). A file over max_bytes is
 * RESOURCE_EXHAUSTED, naming the limit. */
rlx_status rlx_file_read_all(const char* path, const char* what, int64_t max_bytes,
                             void** out_buf, size_t* out_n, rlx_error* err);

/* Reads exactly bytes at offset into dst. The range must lie inside the
 * file (INVALID_ARGUMENT naming the file's size otherwise), checked before
 * any read. */
rlx_status rlx_file_read_range(const char* path, const char* what, int64_t offset, int64_t bytes,
                               void* dst, rlx_error* err);

/* Checks, without reading, that offset + bytes lie inside the regular file
 * path (the same checks and messages as rlx_file_read_range). */
rlx_status rlx_file_check_range(const char* path, const char* what, int64_t offset,
                                int64_t bytes, rlx_error* err);

#endif

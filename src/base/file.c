/* Reading user-supplied files (see file.h). */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

rlx_status rlx_file_open_regular(const char* path, const char* what, int* out_fd,
                                 int64_t* out_size, rlx_error* err) {
  *out_fd = -1;
  *out_size = 0;
  if (!path) return rlx_fail(err, RLX_INVALID_ARGUMENT, "%s: NULL path", what);
  /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
   * writer, before fstat could tell what it is. Regular files ignore it. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return rlx_fail(err, RLX_NOT_FOUND, "%s '%s': cannot open: %s", what, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "%s '%s': cannot stat: %s", what, path,
                    strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "%s '%s' is %s, not a regular file", what, path,
                    kind_of(st.st_mode));
  }
  *out_fd = fd;
  *out_size = (int64_t)st.st_size;
  return RLX_OK;
}

/* Reads exactly n bytes at offset (retrying short reads and EINTR). */
static rlx_status read_exactly(int fd, const char* path, const char* what, int64_t offset,
                               size_t n, uint8_t* dst, rlx_error* err) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = pread(fd, dst + done, n - done, (off_t)(offset + (int64_t)done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "%s '%s': read error: %s", what, path,
                      strerror(errno));
    if (got == 0)
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "%s '%s': file ended after %lld of %zu bytes "
                      "(truncated while reading?)", what, path, (long long)(offset + (int64_t)done),
                      n);
    done += (size_t)got;
  }
  return RLX_OK;
}

rlx_status rlx_file_read_all(const char* path, const char* what, int64_t max_bytes,
                             void** out_buf, size_t* out_n, rlx_error* err) {
  *out_buf = NULL;
  *out_n = 0;
  int fd;
  int64_t size;
  RLX_RETURN_IF_ERROR(rlx_file_open_regular(path, what, &fd, &size, err));
  rlx_status s = RLX_OK;
  uint8_t* buf = NULL;
  if (size > max_bytes || (uint64_t)size >= SIZE_MAX)
    s = rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "%s '%s' is %lld bytes, over the limit of %lld",
                 what, path, (long long)size, (long long)max_bytes);
  else if (!(buf = malloc((size_t)size + 1)))
    s = rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "%s '%s': out of host memory for %lld bytes", what,
                 path, (long long)size);
  else
    s = read_exactly(fd, path, what, 0, (size_t)size, buf, err);
  close(fd);
  if (s != RLX_OK) {
    free(buf);
    return s;
  }
  buf[size] = '\0';
  *out_buf = buf;
  *out_n = (size_t)size;
  return RLX_OK;
}

static rlx_status check_range(const char* path, const char* what, int64_t offset, int64_t bytes,
                              int64_t size, rlx_error* err) {
  if (offset < 0 || bytes < 0 || offset > size || bytes > size - offset)
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "%s '%s' is %lld bytes: offset %lld + %lld bytes do not fit", what, path,
                    (long long)size, (long long)offset, (long long)bytes);
  return RLX_OK;
}

rlx_status rlx_file_check_range(const char* path, const char* what, int64_t offset,
                                int64_t bytes, rlx_error* err) {
  int fd;
  int64_t size;
  RLX_RETURN_IF_ERROR(rlx_file_open_regular(path, what, &fd, &size, err));
  rlx_status s = check_range(path, what, offset, bytes, size, err);
  close(fd);
  return s;
}

rlx_status rlx_file_read_range(const char* path, const char* what, int64_t offset, int64_t bytes,
                               void* dst, rlx_error* err) {
  int fd;
  int64_t size;
  RLX_RETURN_IF_ERROR(rlx_file_open_regular(path, what, &fd, &size, err));
  rlx_status s = check_range(path, what, offset, bytes, size, err);
  if (s == RLX_OK && (uint64_t)bytes > SIZE_MAX)
    s = rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "%s '%s': %lld bytes do not fit in memory", what,
                 path, (long long)bytes);
  if (s == RLX_OK) s = read_exactly(fd, path, what, offset, (size_t)bytes, dst, err);
  close(fd);
  return s;
}

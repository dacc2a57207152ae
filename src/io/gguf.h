/* GGUF files (versions 2 and 3): the public API is in rlx.h; this header
 * adds the in-memory entry point the fuzzer and tests use.
 *
 * Layout read here (all little-endian): "GGUF", u32 version, u64 tensor
 * count, u64 key/value count; the key/values (string key, u32 type, value;
 * a string is u64 length + bytes, an array u32 element type + u64 count +
 * elements); the tensor infos (string name, u32 n_dims, u64 dims, u32 ggml
 * type, u64 offset); padding to general.alignment; the tensor data. */
#ifndef RLX_IO_GGUF_H
#define RLX_IO_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "rlx.h"
#include "base/error.h"

/* Parses the n bytes at buf (which must outlive *out: values and tensor
 * data point into it). name is used in messages. Same checks as
 * rlx_gguf_open; on failure *out is NULL and err holds the message. */
rlx_status rlx_gguf_open_memory(const void* buf, size_t n, const char* name, rlx_gguf** out,
                                rlx_error* err);

#endif

/* safetensors checkpoints (Hugging Face): one file, or a folder of shards
 * with its model.safetensors.index.json. The files are memory-mapped; the
 * tensors' data pointers point into the mappings and stay valid until
 * rlx_safetensors_close. The public API (rlx_safetensors_*) is declared in
 * include/rlx.h; this header adds the in-memory parser the fuzz target and
 * the tests drive. */
#ifndef RLX_IO_SAFETENSORS_H
#define RLX_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "rlx.h"
#include "base/error.h"

/* Largest JSON header accepted: real checkpoints' headers are well under a
 * megabyte (a few hundred bytes per tensor); the limit keeps a hostile
 * length from making the parser allocate without bound. */
#define RLX_SAFETENSORS_MAX_HEADER (100ll << 20)

/* Parses a whole safetensors file held in buf[n] (not copied: buf must
 * outlive the result, which rlx_safetensors_close frees without unmapping
 * it). what names the source in messages. */
rlx_status rlx_safetensors_open_mem(const void* buf, size_t n, const char* what,
                                    rlx_safetensors** out, rlx_error* err);

#ifdef RLX_HAVE_JSONC
struct json_object; /* json-c's, declared here so includers need not see json.h */
/* Parses len bytes of JSON text that must hold exactly one value (then only
 * whitespace, which safetensors writers use as padding); `what` names the
 * text in messages; strict: json-c's strict mode (safetensors headers).
 * Shared by the safetensors reader and tokenizer_hf.c. */
rlx_status rlx_json_parse_one(const char* text, size_t len, const char* what, int strict,
                              struct json_object** out, rlx_error* err);
#endif

#endif

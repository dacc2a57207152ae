/* Nesting depth of a serialized protobuf message, measured before
 * protobuf-c unpacks it.
 *
 * protobuf-c's unpack recurses once per nested message, so a small file
 * nested thousands of levels deep (GraphProto -> NodeProto -> AttributeProto.g
 * -> GraphProto ..., or TypeProto.sequence_type.elem_type -> TypeProto ...)
 * overflows the stack. This walk reads the wire format with an explicit
 * stack, guided by the generated descriptors: only a length-delimited field
 * that the descriptor types as a message opens a level (strings, bytes and
 * packed scalars are skipped), so the depth counted is the one unpack would
 * recurse to. Malformed input is left to unpack to refuse, except what the
 * walk cannot step over. */
#include "io/onnx.h"

#ifdef RLX_HAVE_ONNX

#include <protobuf-c/protobuf-c.h>

/* Reads a base-128 varint at *pos (below end); 0 when it runs past end or
 * over 10 bytes. */
static int read_varint(const uint8_t* buf, size_t end, size_t* pos, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70 && *pos < end; shift += 7) {
    uint8_t b = buf[(*pos)++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 1;
    }
  }
  return 0;
}

typedef struct level {
  const ProtobufCMessageDescriptor* desc;
  size_t end; /* where this message's bytes stop */
} level;

/* The descriptor of field `number` of desc when it holds a message, else NULL. */
static const ProtobufCMessageDescriptor* message_field(const ProtobufCMessageDescriptor* desc,
                                                       uint64_t number) {
  if (number == 0 || number > 0x1fffffff) return NULL;
  const ProtobufCFieldDescriptor* f =
      protobuf_c_message_descriptor_get_field(desc, (unsigned)number);
  return f && f->type == PROTOBUF_C_TYPE_MESSAGE ? f->descriptor : NULL;
}

/* Steps over one field's value of the given wire type; 0 if it does not fit. */
static int skip_value(const uint8_t* buf, size_t end, size_t* pos, unsigned wire) {
  uint64_t v;
  switch (wire) {
    case 0: return read_varint(buf, end, pos, &v);
    case 1: if (end - *pos < 8) return 0; *pos += 8; return 1;
    case 5: if (end - *pos < 4) return 0; *pos += 4; return 1;
    case 2:
      if (!read_varint(buf, end, pos, &v) || v > end - *pos) return 0;
      *pos += (size_t)v;
      return 1;
    default: return 0; /* groups (3, 4) are not in onnx.proto; 6, 7 do not exist */
  }
}

rlx_status rlx_onnx_check_depth(const void* data, size_t n,
                                const ProtobufCMessageDescriptor* root, rlx_error* err) {
  const uint8_t* buf = data;
  level stack[RLX_ONNX_MAX_DEPTH];
  int32_t depth = 1;
  stack[0] = (level){root, n};
  size_t pos = 0;
  while (depth > 0) {
    level* top = &stack[depth - 1];
    if (pos >= top->end) { /* this message is done: back to its parent */
      depth--;
      continue;
    }
    uint64_t tag, len;
    if (!read_varint(buf, top->end, &pos, &tag)) break;
    unsigned wire = (unsigned)(tag & 7);
    const ProtobufCMessageDescriptor* sub = wire == 2 ? message_field(top->desc, tag >> 3) : NULL;
    if (!sub) {
      if (!skip_value(buf, top->end, &pos, wire)) break;
      continue;
    }
    if (!read_varint(buf, top->end, &pos, &len) || len > top->end - pos) break;
    if (depth == RLX_ONNX_MAX_DEPTH)
      return rlx_fail(err, RLX_INVALID_ARGUMENT,
                      "%s nests messages deeper than %d levels (field %s.%llu at byte %zu); "
                      "refused before parsing",
                      root->name, RLX_ONNX_MAX_DEPTH, top->desc->name,
                      (unsigned long long)(tag >> 3), pos);
    stack[depth++] = (level){sub, pos + (size_t)len};
  }
  /* Stopped on bytes the walk cannot step over: unpack refuses them too,
   * without going deeper than the levels seen so far. */
  return RLX_OK;
}

#endif /* RLX_HAVE_ONNX */

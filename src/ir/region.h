/* ElementwiseRegion programs: the bytecode an `elementwise_region` node
 * carries in its DATA attribute (ops.def), written once here for the IR,
 * the fusion pass, the lowering and every kernel that interprets it.
 *
 * A region computes one output element from the elements of its inputs at
 * the same index (each input broadcast, NumPy rules, into the output shape)
 * by running a short straight-line program. Values live in *slots*: slots
 * 0 .. n_inputs-1 hold the inputs, slot n_inputs + k the result of
 * instruction k. The output is the result of the last instruction.
 *
 * Every result is rounded to the region's dtype (a float compute dtype) as
 * it is made, exactly as the unfused chain stores each intermediate, so a
 * region gives the unfused chain's bits on the CPU reference.
 *
 * Serialised form (little endian), RLX_REGION_HEADER + 12 bytes per
 * instruction:
 *   u8 version (RLX_REGION_VERSION), u8 dtype (rlx_dtype), u8 n_inputs,
 *   u8 n_instrs, 4 bytes zero;
 *   per instruction: u8 kind, u8 op, u8 a, u8 b, f64 immediate.
 * Text files are user input: rlx_region_decode validates everything (the
 * shape rule calls it when a node is added or parsed). */
#ifndef RLX_IR_REGION_H
#define RLX_IR_REGION_H

#include <stddef.h>
#include <stdint.h>

#include "rlx.h"
#include "base/error.h"

#define RLX_REGION_VERSION 1
#define RLX_REGION_MAX_INSTRS 32
#define RLX_REGION_MAX_INPUTS 16
#define RLX_REGION_MAX_SLOTS (RLX_REGION_MAX_INPUTS + RLX_REGION_MAX_INSTRS)
#define RLX_REGION_HEADER 8
#define RLX_REGION_INSTR_BYTES 12

/* Instruction kinds. */
enum rlx_region_kind {
  RLX_RI_UNARY = 0,  /* op = rlx_activation (not NONE); reads slot a */
  RLX_RI_BINARY = 1, /* op = rlx_binary_op; reads slots a, b */
  RLX_RI_CAST = 2,   /* reads input slot a (another float dtype), rounds it to the region's */
  RLX_RI_CONST = 3,  /* the immediate, rounded to the region's dtype; no operand */
  RLX_RI_KIND_COUNT
};

typedef struct rlx_region_instr {
  uint8_t kind, op, a, b;
} rlx_region_instr;

/* A decoded program (plain data: copied into steps and kernel parameters). */
typedef struct rlx_region_program {
  int32_t dtype; /* rlx_dtype of the output and of every result */
  int32_t n_inputs, n_instrs;
  rlx_region_instr code[RLX_REGION_MAX_INSTRS];
  double imm[RLX_REGION_MAX_INSTRS]; /* per instruction; CONST only */
} rlx_region_program;

/* Bytes of the serialised program. */
static inline size_t rlx_region_bytes(int32_t n_instrs) {
  return RLX_REGION_HEADER + (size_t)n_instrs * RLX_REGION_INSTR_BYTES;
}

/* Serialises p into buf (rlx_region_bytes(p->n_instrs) bytes). */
void rlx_region_encode(const rlx_region_program* p, uint8_t* buf);

/* Decodes and validates `bytes`: version, counts, op codes, operand slots
 * (only inputs and earlier results), every input read, dtypes: the region
 * dtype a compute float (f32 f16 bf16 f64); in_dtypes[i] (n_in of them, the
 * node's inputs; NULL skips the dtype checks) must be the region's, except
 * inputs read only by CAST, which must be other compute floats. A failure
 * says what is wrong in msg and returns RLX_INVALID_ARGUMENT. */
rlx_status rlx_region_decode(const void* bytes, size_t n_bytes, const rlx_dtype* in_dtypes,
                             int32_t n_in, rlx_region_program* out, char* msg, size_t msg_cap);

/* Registers an interpreter needs to run p when it loads each input just
 * before its first non-cast read, frees a value after its last read and
 * gives each result a free register after its operands' are freed (a cast
 * loads its input itself; immediates take none; a constant output takes
 * one at the end). The CUDA kernel allocates exactly so; the fusion pass
 * keeps regions within its register file with it. */
int32_t rlx_region_max_live(const rlx_region_program* p);

/* Text of an instruction kind ("unary", "binary", "cast", "const"). */
const char* rlx_region_kind_name(int32_t kind);

#endif

/* Graph inputs whose values shape the model (an ONNX Reshape target, Slice
 * bounds, TopK k fed as graph inputs), handled at run time.
 *
 * Such a graph (rlx_onnx_load) has Deferred outputs and a rebuild hook
 * (ir/graph.h). Its executable keeps the user's params and inputs as any
 * executable does; at each run it keys the host bytes of the value inputs,
 * finds or builds the variant for that key (the hook builds the real graph
 * with those inputs frozen; it is compiled for the same device and options)
 * and runs it with the other inputs and the params. Variants are kept
 * least-recently-used, at most RLX_VALUE_INPUT_VARIANTS. */
#ifndef RLX_RUNTIME_VALUE_INPUTS_H
#define RLX_RUNTIME_VALUE_INPUTS_H

#include "ir/graph.h"

typedef struct rlx_vi rlx_vi;

/* What value_inputs.c reads of the executable that owns it (executable.c). */
typedef struct rlx_exec_slot {
  const char* name;
  rlx_dtype dtype;
  int32_t rank;
  const int64_t* shape; /* inputs: as last given; params: declared */
  const void* data;
  size_t bytes;
  int set;
  uint64_t version;     /* params: bumped on every set */
} rlx_exec_slot;
int32_t rlx_exec_slot_count(const rlx_exec* e, int is_param);
void rlx_exec_slot_get(const rlx_exec* e, int is_param, int32_t i, rlx_exec_slot* out);
uint64_t rlx_exec_params_version(const rlx_exec* e);
const char* rlx_exec_device_name(const rlx_exec* e);
const rlx_compile_options* rlx_exec_options(const rlx_exec* e);
const uint8_t* rlx_exec_selection(const rlx_exec* e);
rlx_error* rlx_exec_error(const rlx_exec* e);

/* For e, whose source graph src has Deferred nodes: INVALID_ARGUMENT when
 * src has no rebuild hook (a graph parsed from text) or the options ask for
 * what variants cannot share (device state, an active extent). */
rlx_status rlx_vi_create(const rlx_graph* src, const rlx_compile_options* o, rlx_vi** out,
                         rlx_error* err);
void rlx_vi_destroy(rlx_vi* vi);
/* A copy for a clone of owner (the clone has owner's inputs and params):
 * each variant is cloned (compiled parts shared, params carried over). */
rlx_status rlx_vi_clone(const rlx_vi* vi, const rlx_exec* owner, rlx_vi** out, rlx_error* err);
/* One run of owner e (errors in e's error). */
rlx_status rlx_vi_run(rlx_exec* e, rlx_vi* vi);
/* The variant that ran last (NULL before the first run). */
const rlx_exec* rlx_vi_current(const rlx_vi* vi);
/* How many variants are kept, and how many imports the executable made
 * (tests check that the same values reuse a variant). */
int32_t rlx_vi_variant_count(const rlx_vi* vi);
/* e's value-input state, NULL for an ordinary executable (executable.c). */
const rlx_vi* rlx_exec_value_inputs(const rlx_exec* e);
int64_t rlx_vi_build_count(const rlx_vi* vi);

#endif

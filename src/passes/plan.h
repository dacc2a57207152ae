/* Memory planner: every value gets a byte offset in one arena.
 *
 * Liveness is measured in node positions (the graph is topologically
 * ordered). Leaves (inputs, params, constants) and graph outputs live for the
 * whole run. A view (OPF_VIEW) aliases its source: it gets the source's offset
 * and extends the source's lifetime to its own last use. An elementwise op
 * (rlx_plan_inplace_ok) may take the bytes of an input that dies at that node.
 * Everything else is first-fit by offset among the blocks live at the same
 * time, largest first. */
#ifndef RLX_PASSES_PLAN_H
#define RLX_PASSES_PLAN_H

#include "ir/graph.h"

typedef struct rlx_plan {
  int32_t n_values;
  uint64_t* offset;    /* per value: byte offset in the arena */
  uint64_t* bytes;     /* per value: its bytes (0 for none) */
  int32_t* root;       /* per value: the value that owns its bytes (itself unless a view / in place) */
  int32_t* first;      /* per value: node position where its bytes become live */
  int32_t* last;       /* per value: last node position that reads them (n_nodes for persistent) */
  uint64_t arena_bytes;     /* total arena size */
  uint64_t tensor_bytes;    /* sum of bytes over values that own their bytes */
  uint64_t peak_live_bytes; /* max over positions of the bytes owned by live values */
  uint64_t alignment;
} rlx_plan;

typedef struct rlx_plan_options {
  uint64_t alignment; /* every offset is a multiple (power of two, >= 16) */
  int32_t inplace;    /* allow writing over a dying input */
  /* 0, or the size of the buffers a backend splits its arena into: a block
   * no larger starts at the next multiple rather than straddle one (a hint:
   * such a backend still handles straddling tensors, only slower) */
  uint64_t boundary;
} rlx_plan_options;

/* The graph must have only static dims. Errors go to g->err. */
rlx_status rlx_plan_memory(rlx_graph* g, const rlx_plan_options* opt, rlx_plan* out);
/* rlx_plan_memory with device state (rlx_compile_options.state_*): pairs
 * (input value, output value), 2 * n_pairs entries, whose output is copied
 * into the input after every run. Where legal, the output is placed in the
 * input's own bytes so no copy is needed: its producer is elementwise over
 * the input (same shape, a view of it allowed), no later node reads the
 * input, and neither is a graph output twice over. Other pairs are left as
 * they are (the run copies). rlx_plan_verify does not know these pairs. */
rlx_status rlx_plan_memory_states(rlx_graph* g, const rlx_plan_options* opt,
                                  const int32_t* state_pairs, int32_t n_pairs, rlx_plan* out);
void rlx_plan_free(rlx_plan* p);

/* May node ni write its output over input slot `slot` (when that input dies
 * there)? True for elementwise ops whose input has the output's exact shape
 * and element size (no broadcast) and is not a persistent value. */
int rlx_plan_inplace_ok(const rlx_graph* g, int32_t ni, int32_t slot);

/* Checks the plan: no two values whose bytes are live at the same position
 * overlap unless they share a root; offsets aligned; arena large enough.
 * Returns RLX_INTERNAL with a message naming the pair on violation. */
rlx_status rlx_plan_verify(rlx_graph* g, const rlx_plan* p);

#endif

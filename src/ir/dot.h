/* Graphviz export of a graph (used by `rlx dot` before and after passes). */
#ifndef RLX_IR_DOT_H
#define RLX_IR_DOT_H

#include "ir/graph.h"

/* A Graphviz digraph: one box per node labelled with its op (member name for
 * the families: "add", "relu", "reduce_sum"), its label and its output
 * type(s); an edge from each producer to each consumer. Leaves are drawn
 * differently (inputs, params, constants), graph outputs get a double border.
 * title may be NULL. *out_text is malloc'd (rlx_free). */
rlx_status rlx_graph_to_dot(const rlx_graph* g, const char* title, char** out_text);

#endif

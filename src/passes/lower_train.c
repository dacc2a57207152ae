/* Lowering of the training ops: CrossEntropy (two steps: per-row partials,
 * then their mean in a fixed order, so the loss is the same bits on every
 * run), its backward, GatherBackward, and the fused optimizer updates. */
#include <string.h>

#include "passes/lower.h"

int rlx_lower_is_train_op(rlx_op op) {
  return op == RLX_OP_CROSS_ENTROPY || op == RLX_OP_CROSS_ENTROPY_BACKWARD ||
         op == RLX_OP_GATHER_BACKWARD || op == RLX_OP_SGD_UPDATE || op == RLX_OP_ADAM_UPDATE;
}

static rlx_status push(rlx_step_list* out, rlx_kernel k, int32_t ni, rlx_step** s) {
  *s = rlx_step_push(out, k, ni);
  RLX_CHECK_ALLOC(out->err, *s);
  return RLX_OK;
}

static int64_t numel(const rlx_view* v) { return rlx_view_numel(v); }

/* Logits [..., V] seen as [rows, V]. */
static rlx_xent_params xent_params(const rlx_graph* g, const rlx_node* n) {
  const rlx_type* x = rlx_tensor_type(g, n->in[0]);
  rlx_xent_params p;
  memset(&p, 0, sizeof p);
  p.vocab = x->shape[x->rank - 1];
  p.rows = 1;
  for (int32_t d = 0; d + 1 < x->rank; d++) p.rows *= x->shape[d];
  p.ignore_index = n->a.ignore_index;
  p.label_smoothing = n->a.label_smoothing;
  return p;
}

static rlx_status lower_xent(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                             rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_XENT, ni, &s));
  s->op = RLX_XENT_ROWS;
  s->n_in = 2;
  s->n_out = 1;
  s->in[0] = rlx_view_of(g, plan, n->in[0]);
  s->in[1] = rlx_view_of(g, plan, n->in[1]);
  s->out[0] = rlx_view_of(g, plan, n->out[1]);
  s->p.xent = xent_params(g, n);
  rlx_xent_params p = s->p.xent;
  rlx_view partials = s->out[0];
  RLX_RETURN_IF_ERROR(push(out, RLX_K_XENT, ni, &s));
  s->op = RLX_XENT_MEAN;
  s->n_in = 1;
  s->n_out = 1;
  s->in[0] = partials;
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  s->p.xent = p;
  return RLX_OK;
}

static rlx_status lower_xent_backward(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                      rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_XENT, ni, &s));
  s->op = RLX_XENT_BACKWARD;
  s->n_in = 3;
  s->n_out = 1;
  for (int32_t i = 0; i < 3; i++) s->in[i] = rlx_view_of(g, plan, n->in[i]);
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  s->p.xent = xent_params(g, n);
  return RLX_OK;
}

static rlx_status lower_gather_backward(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                                        rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  const rlx_type* dx = rlx_tensor_type(g, n->out[0]);
  int32_t ax = n->a.axis;
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_GATHER_BACKWARD, ni, &s));
  s->n_in = 2;
  s->n_out = 1;
  s->in[0] = rlx_view_of(g, plan, n->in[0]);
  s->in[1] = rlx_view_of(g, plan, n->in[1]);
  s->out[0] = rlx_view_of(g, plan, n->out[0]);
  rlx_gather_params* p = &s->p.gather;
  p->outer = 1;
  for (int32_t d = 0; d < ax; d++) p->outer *= dx->shape[d];
  p->axis_len = dx->shape[ax];
  p->inner = 1;
  for (int32_t d = ax + 1; d < dx->rank; d++) p->inner *= dx->shape[d];
  p->n_idx = numel(&s->in[1]);
  return RLX_OK;
}

static void opt_constants(const rlx_node* n, rlx_opt_params* p) {
  const float* c = n->a.opt.v;
  if (n->op == RLX_OP_SGD_UPDATE) {
    p->momentum = c[RLX_OPT_SGD_MOMENTUM];
    p->dampening = c[RLX_OPT_SGD_DAMPENING];
    p->weight_decay = c[RLX_OPT_SGD_WEIGHT_DECAY];
    p->nesterov = c[RLX_OPT_SGD_NESTEROV] != 0.0f;
    p->has_buf = n->in[2] != RLX_NONE;
  } else {
    p->beta1 = c[RLX_OPT_ADAM_BETA1];
    p->beta2 = c[RLX_OPT_ADAM_BETA2];
    p->eps = c[RLX_OPT_ADAM_EPS];
    p->weight_decay = c[RLX_OPT_ADAM_WEIGHT_DECAY];
    p->decoupled = c[RLX_OPT_ADAM_DECOUPLED] != 0.0f;
  }
}

/* Inputs in the node's order (an absent buffer stays an absent view);
 * outputs p, then the state that exists. */
static rlx_status lower_update(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                               rlx_step_list* out) {
  const rlx_node* n = &g->nodes[ni];
  rlx_step* s;
  RLX_RETURN_IF_ERROR(push(out, RLX_K_OPT_UPDATE, ni, &s));
  s->op = n->op == RLX_OP_SGD_UPDATE ? RLX_OPT_SGD : RLX_OPT_ADAM;
  s->n_in = n->n_in;
  for (int32_t i = 0; i < n->n_in; i++)
    if (n->in[i] != RLX_NONE) s->in[i] = rlx_view_of(g, plan, n->in[i]);
  opt_constants(n, &s->p.opt);
  s->n_out = s->op == RLX_OPT_SGD && !s->p.opt.has_buf ? 1 : n->n_out;
  for (int32_t i = 0; i < s->n_out; i++) s->out[i] = rlx_view_of(g, plan, n->out[i]);
  s->p.opt.n = numel(&s->in[0]);
  return RLX_OK;
}

rlx_status rlx_lower_train(const rlx_graph* g, const rlx_plan* plan, int32_t ni,
                           rlx_step_list* out) {
  int32_t first = out->n;
  rlx_status st;
  switch (g->nodes[ni].op) {
    case RLX_OP_CROSS_ENTROPY: st = lower_xent(g, plan, ni, out); break;
    case RLX_OP_CROSS_ENTROPY_BACKWARD: st = lower_xent_backward(g, plan, ni, out); break;
    case RLX_OP_GATHER_BACKWARD: st = lower_gather_backward(g, plan, ni, out); break;
    case RLX_OP_SGD_UPDATE:
    case RLX_OP_ADAM_UPDATE: st = lower_update(g, plan, ni, out); break;
    default: {
      char buf[128];
      return rlx_fail(out->err, RLX_UNIMPLEMENTED, "lower: %s is not a training op",
                      rlx_node_str(g, ni, buf, sizeof buf));
    }
  }
  if (st != RLX_OK) out->n = first; /* drop a half-built node */
  return st;
}

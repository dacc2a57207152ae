/* The CUDA launch builder's batching of optimizer updates
 * (rlx_cuda_batch_updates, cuda_launch.c) on hand-made launch lists: which
 * updates join one rlx_opt_multi launch, where it is issued, and that the
 * launches between keep their order. Host code only, so no GPU is needed,
 * but the CUDA backend must be built (else exit 77, ctest SKIP). The
 * kernel side (same bits as one launch per param) is test_train's
 * batched_updates_same_bits and test_parity's update_batch on the GPU.
 *
 * A list is written as launches "U<step>" (update), "C<step>" (another
 * kernel), "H<step>" (host step), "M<count>@<step>[<params>]" (a batched
 * run: its table's params by index). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#ifdef RLX_HAVE_CUDA
#include "backends/cuda/cuda_internal.h"

enum { MAX_LAUNCHES = 32, N = 100 };
static rlx_step steps[MAX_LAUNCHES];
static rlx_launch_list list;

/* Param k's p, g, m, v at 10000 * k + 1000 * slot; the hyper tensor at HYPER. */
static const uint64_t HYPER = 900000;
static uint64_t buf(int k, int slot) { return 10000u * (uint64_t)k + 1000u * (uint64_t)slot; }
static rlx_range span(uint64_t at, uint64_t bytes) { return (rlx_range){at, at + bytes}; }

static void reset(void) {
  for (int32_t i = 0; i < list.n_init; i++) free(list.init[i].data);
  free(list.init);
  free(list.v);
  memset(&list, 0, sizeof list);
  memset(steps, 0, sizeof steps);
  list.v = calloc(MAX_LAUNCHES, sizeof *list.v);
  list.cap = MAX_LAUNCHES;
}

static rlx_launch* push_launch(rlx_kernel k, rlx_launch_kind kind, rlx_cuda_fn fn) {
  rlx_launch* x = &list.v[list.n];
  x->kind = kind;
  x->fn = fn;
  x->step = list.n;
  steps[list.n].kernel = k;
  list.n++;
  return x;
}

/* AdamW on param k, all f32, in place. */
static void add_update(int k) {
  rlx_step* s = &steps[list.n];
  rlxk_opt* p = &push_launch(RLX_K_OPT_UPDATE, RLX_LAUNCH_KERNEL, RLX_CUDA_FN_OPT_UPDATE)->p.opt;
  for (int q = 0; q < 4; q++) s->reads[q] = span(buf(k, q), 4 * N);
  s->reads[4] = span(HYPER, 16);
  s->n_reads = 5;
  s->writes[0] = s->reads[0], s->writes[1] = s->reads[2], s->writes[2] = s->reads[3];
  s->n_writes = 3;
  p->n = N;
  p->op = RLX_OPT_ADAM;
  p->decoupled = 1;
  p->beta1 = 0.9f, p->beta2 = 0.999f, p->eps = 1e-8f, p->weight_decay = 0.01f;
  for (int q = 0; q < 4; q++) p->off[q] = buf(k, q), p->dt[q] = RLX_F32;
  p->off[4] = HYPER, p->dt[4] = RLX_F32;
  p->ooff[0] = buf(k, 0), p->ooff[1] = buf(k, 2), p->ooff[2] = buf(k, 3);
  for (int q = 0; q < 3; q++) p->odt[q] = RLX_F32;
}

/* A kernel reading [r, r + rn) and writing [w, w + wn). */
static void add_other(uint64_t r, uint64_t rn, uint64_t w, uint64_t wn) {
  rlx_step* s = &steps[list.n];
  push_launch(RLX_K_COPY, RLX_LAUNCH_KERNEL, RLX_CUDA_FN_EW_F32);
  s->reads[0] = span(r, rn);
  s->writes[0] = span(w, wn);
  s->n_reads = s->n_writes = 1;
}

/* Batches the list; its description in `out` ("" and a failed check on
 * an error). */
static int batch(char* out, size_t cap) {
  rlx_step_list sl = {steps, list.n, MAX_LAUNCHES, NULL};
  rlx_error err;
  memset(&err, 0, sizeof err);
  out[0] = '\0';
  if (rlx_cuda_batch_updates(&list, &sl, &err) != RLX_OK) return 0;
  size_t used = 0;
  int32_t table = 0;
  for (int32_t i = 0; i < list.n && used < cap; i++) {
    const rlx_launch* x = &list.v[i];
    if (x->kind == RLX_LAUNCH_KERNEL && x->fn == RLX_CUDA_FN_OPT_MULTI) {
      const rlxk_opt* t = (const rlxk_opt*)list.init[table++].data;
      used += (size_t)snprintf(out + used, cap - used, "%sM%d@%d[", used ? " " : "",
                               x->p.opt_multi.count, x->step);
      for (int32_t k = 0; k < x->p.opt_multi.count && used < cap; k++)
        used += (size_t)snprintf(out + used, cap - used, "%s%d", k ? "," : "",
                                 (int)(t[k].off[0] / 10000u));
      if (used < cap) used += (size_t)snprintf(out + used, cap - used, "]");
      continue;
    }
    char kind = x->kind == RLX_LAUNCH_HOST ? 'H' : x->fn == RLX_CUDA_FN_OPT_UPDATE ? 'U' : 'C';
    used += (size_t)snprintf(out + used, cap - used, "%s%c%d", used ? " " : "", kind, x->step);
  }
  return 1;
}

#define CHECK_BATCH(want)                                                   \
  do {                                                                      \
    char got_[256];                                                         \
    CHECK(batch(got_, sizeof got_));                                        \
    CHECK_MSG(strcmp(got_, want) == 0, "got \"%s\", want \"%s\"", got_, want); \
  } while (0)

/* ------------------------------------------------------------ cases */

TEST(consecutive_updates_are_one_launch) {
  reset();
  for (int k = 0; k < 3; k++) add_update(k);
  CHECK_BATCH("M3@2[0,1,2]");
}

/* Each update's input made just before it (distinct buffers): the
 * earlier updates wait for the last. */
TEST(updates_delayed_past_their_inputs) {
  reset();
  for (int k = 0; k < 3; k++) {
    add_other(500000 + 1000u * (uint64_t)k, 400, buf(k, 1), 4 * N);
    add_update(k);
  }
  CHECK_BATCH("C0 C2 C4 M3@5[0,1,2]");
}

/* The inputs share one temporary: no update can move. */
TEST(shared_temporary_keeps_the_order) {
  reset();
  for (int k = 0; k < 3; k++) {
    add_other(500000, 400, 700000, 400);
    add_update(k);
    steps[list.n - 1].reads[1] = span(700000, 400);
  }
  CHECK_BATCH("C0 U1 C2 U3 C4 U5");
}

/* Each updated param read (cast) right after its update: the later
 * updates move up to the first. */
TEST(updates_hoisted_before_readers_of_new_params) {
  reset();
  for (int k = 0; k < 3; k++) {
    add_update(k);
    add_other(buf(k, 0), 4 * N, 600000 + 1000u * (uint64_t)k, 200);
  }
  CHECK_BATCH("M3@0[0,1,2] C1 C3 C5");
}

/* A cast writing into [w, w + 4n) (f32) from n halves at r, as mixed
 * precision casts each gradient: a COPY step with its views. */
static void add_grad_cast(uint64_t r, uint64_t w) {
  rlx_step* s = &steps[list.n];
  push_launch(RLX_K_COPY, RLX_LAUNCH_KERNEL, RLX_CUDA_FN_EW_GENERIC32);
  s->n_in = s->n_out = 1;
  s->in[0] = (rlx_view){.offset = r, .dtype = RLX_BF16, .rank = 1, .shape = {N}, .stride = {1}};
  s->out[0] = (rlx_view){.offset = w, .dtype = RLX_F32, .rank = 1, .shape = {N}, .stride = {1}};
  s->reads[0] = span(r, 2 * N);
  s->writes[0] = span(w, 4 * N);
  s->n_reads = s->n_writes = 1;
}

/* Every gradient cast to f32 into one shared temporary just before its
 * update (bf16 training): the updates read the halves themselves, so the
 * temporary no longer pins them, and they become one launch after the
 * casts. */
TEST(updates_read_past_gradient_casts) {
  reset();
  for (int k = 0; k < 3; k++) {
    add_grad_cast(800000 + 1000u * (uint64_t)k, 700000);
    add_update(k);
    steps[list.n - 1].reads[1] = span(700000, 4 * N);
    list.v[list.n - 1].p.opt.off[1] = 700000;
  }
  CHECK_BATCH("C0 C2 C4 M3@5[0,1,2]");
  const rlxk_opt* t = (const rlxk_opt*)list.init[0].data;
  for (int k = 0; k < 3; k++)
    CHECK_MSG(t[k].off[1] == 800000 + 1000u * (uint64_t)k && t[k].dt[1] == RLX_BF16,
              "entry %d reads its gradient at %llu as dtype %d", k, (unsigned long long)t[k].off[1],
              t[k].dt[1]);
}

/* The same casts with a writer of one cast's source between it and the
 * update: that update keeps reading the temporary (order as written). */
TEST(overwritten_cast_source_stays) {
  reset();
  add_grad_cast(800000, 700000);
  add_other(0, 4, 800000, 2 * N); /* rewrites the first cast's source */
  add_update(0);
  steps[list.n - 1].reads[1] = span(700000, 4 * N);
  list.v[list.n - 1].p.opt.off[1] = 700000;
  CHECK_BATCH("C0 C1 U2");
  CHECK(list.v[2].p.opt.off[1] == 700000 && list.v[2].p.opt.dt[1] == RLX_F32);
}

/* A launch writing the hyper tensor between two updates: neither way. */
TEST(rewritten_hyper_splits) {
  reset();
  add_update(0);
  add_other(0, 4, HYPER, 16);
  add_update(1);
  CHECK_BATCH("U0 C1 U2");
}

TEST(host_step_ends_a_run) {
  reset();
  add_update(0);
  add_update(1);
  push_launch(RLX_K_HOST, RLX_LAUNCH_HOST, RLX_CUDA_FN_EW_F32);
  add_update(2);
  add_update(3);
  CHECK_BATCH("M2@1[0,1] H2 M2@4[2,3]");
}

/* A second update of the same bytes cannot join (its order matters). */
TEST(overlapping_update_stays_apart) {
  reset();
  for (int k = 0; k < 3; k++) add_update(k);
  add_update(1);
  CHECK_BATCH("M3@2[0,1,2] U3");
}

/* Another optimizer constant: two runs. */
TEST(different_constants_split) {
  reset();
  add_update(0);
  add_update(1);
  add_update(2);
  list.v[2].p.opt.weight_decay = 0.0f;
  add_update(3);
  list.v[3].p.opt.weight_decay = 0.0f;
  CHECK_BATCH("M2@1[0,1] M2@3[2,3]");
}

int main(void) {
  RUN(consecutive_updates_are_one_launch);
  RUN(updates_delayed_past_their_inputs);
  RUN(shared_temporary_keeps_the_order);
  RUN(updates_hoisted_before_readers_of_new_params);
  RUN(rewritten_hyper_splits);
  RUN(host_step_ends_a_run);
  RUN(overlapping_update_stays_apart);
  RUN(different_constants_split);
  RUN(updates_read_past_gradient_casts);
  RUN(overwritten_cast_source_stays);
  reset();
  free(list.v);
  list.v = NULL;
  return test_summary();
}

#else
int main(void) {
  printf("SKIP cuda (backend not built)\n");
  return 77;
}
#endif

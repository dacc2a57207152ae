/* The merge loop BPE and SentencePiece share (see tokenizer.h): candidate
 * pairs of adjacent symbols wait in a binary heap ordered by (priority,
 * left position); the best one merges, and the pairs it makes with its new
 * neighbours join the heap. A popped pair whose symbols changed since it
 * was pushed (either side merged away or grew) is stale and skipped, so
 * each merge costs O(log n) and a whole text O(n log n). */
#include "io/tokenizer.h"

#include <stdlib.h>

typedef struct cand {
  double priority;
  int32_t left, right, merged;
  uint32_t left_len, right_len; /* the symbols' lengths when pushed */
} cand;

typedef struct heap {
  cand* v;
  int64_t n, cap;
} heap;

static int before(const cand* a, const cand* b) {
  if (a->priority != b->priority) return a->priority < b->priority;
  return a->left < b->left;
}

static rlx_status heap_push(heap* h, cand c, rlx_error* err) {
  if (h->n == h->cap) {
    int64_t cap = h->cap ? 2 * h->cap : 64;
    cand* v = realloc(h->v, (size_t)cap * sizeof *v);
    RLX_CHECK_ALLOC(err, v);
    h->v = v;
    h->cap = cap;
  }
  int64_t i = h->n++;
  while (i > 0 && before(&c, &h->v[(i - 1) / 2])) {
    h->v[i] = h->v[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->v[i] = c;
  return RLX_OK;
}

static cand heap_pop(heap* h) {
  cand top = h->v[0], last = h->v[--h->n];
  int64_t i = 0;
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c])) c++;
    if (!before(&h->v[c], &last)) break;
    h->v[i] = h->v[c];
    i = c;
  }
  if (h->n) h->v[i] = last;
  return top;
}

/* Pushes the pair (l, l.next) when the caller's rule allows it. */
static rlx_status offer(const rlx_tokenizer* t, const char* text, tok_sym* syms, int32_t l,
                        tok_pair_fn pair, heap* h, rlx_error* err) {
  if (l < 0 || syms[l].next < 0) return RLX_OK;
  int32_t r = syms[l].next;
  cand c = {0, l, r, -1, syms[l].len, syms[r].len};
  if (!pair(t, text, &syms[l], &syms[r], &c.priority, &c.merged)) return RLX_OK;
  return heap_push(h, c, err);
}

rlx_status tok_merge(const rlx_tokenizer* t, const char* text, tok_sym* syms, int32_t n,
                     tok_pair_fn pair, rlx_error* err) {
  heap h = {0};
  rlx_status s = RLX_OK;
  for (int32_t i = 0; i + 1 < n && s == RLX_OK; i++) s = offer(t, text, syms, i, pair, &h, err);
  while (s == RLX_OK && h.n > 0) {
    cand c = heap_pop(&h);
    tok_sym* l = &syms[c.left];
    tok_sym* r = &syms[c.right];
    /* stale: one side was merged away or has grown since the push */
    if (l->len == 0 || r->len == 0 || l->next != c.right || l->len != c.left_len ||
        r->len != c.right_len)
      continue;
    l->len += r->len;
    l->id = c.merged;
    l->next = r->next;
    if (r->next >= 0) syms[r->next].prev = c.left;
    r->len = 0;
    r->next = r->prev = -1;
    s = offer(t, text, syms, l->prev, pair, &h, err);
    if (s == RLX_OK) s = offer(t, text, syms, c.left, pair, &h, err);
  }
  free(h.v);
  return s;
}

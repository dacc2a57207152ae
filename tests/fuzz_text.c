/* Fuzz target for the text parser: any input either fails with a positioned
 * message or parses into a graph whose printed form reads back and prints
 * identically. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlx.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void check_message(rlx_status s, const char* err) {
  /* Every failure carries "line:col: what". */
  if (s == RLX_OK) return;
  if (s == RLX_RESOURCE_EXHAUSTED) return;
  if (!err || err[0] < '1' || err[0] > '9' || !strchr(err, ':')) {
    fprintf(stderr, "parse failed (%d) without a positioned message: %s\n", (int)s,
            err ? err : "(null)");
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  rlx_graph* g = NULL;
  char* err = NULL;
  rlx_status s = rlx_graph_parse(text, &g, &err);
  check_message(s, err);
  rlx_free(err);
  free(text);
  if (s != RLX_OK) return 0;

  char* first = NULL;
  if (rlx_graph_print(g, &first) != RLX_OK) abort();
  rlx_graph* g2 = NULL;
  err = NULL;
  if (rlx_graph_parse(first, &g2, &err) != RLX_OK) {
    fprintf(stderr, "printed text does not parse: %s\n%s", err ? err : "", first);
    abort();
  }
  char* second = NULL;
  if (rlx_graph_print(g2, &second) != RLX_OK) abort();
  if (strcmp(first, second) != 0) {
    fprintf(stderr, "round trip mismatch:\n%s----\n%s", first, second);
    abort();
  }
  rlx_free(first);
  rlx_free(second);
  rlx_graph_destroy(g);
  rlx_graph_destroy(g2);
  return 0;
}

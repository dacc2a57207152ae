/* Fuzz target for the ONNX loader: any bytes either import (and the graph
 * prints) or fail with a status and a message; never a crash, a leak or a
 * read past the buffer. The same bytes also go through the TensorProto
 * decoder used for .pb test data. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/onnx.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  /* A lower import-time budget than the default 1 GiB keeps every input
   * far below the fuzzer's RSS limit (2 GiB) even under ASan. */
  static int budget_set;
  if (!budget_set) budget_set = setenv("RLX_ONNX_FOLD_BUDGET", "134217728", 1) == 0;
  rlx_onnx_model* m = NULL;
  rlx_error err = {{0}};
  rlx_status s = rlx_onnx_import(data, size, NULL, &m, &err);
  if (s == RLX_OK) {
    char* text = NULL;
    if (rlx_graph_print(m->graph, &text) == RLX_OK) rlx_free(text);
    rlx_onnx_model_destroy(m);
  } else if (!err.msg[0] && s != RLX_RESOURCE_EXHAUSTED) {
    fprintf(stderr, "import failed (%s) without a message\n", rlx_status_name(s));
    abort();
  }
  rlx_host_tensor t;
  if (rlx_onnx_decode_tensor(data, size, &t, NULL, 0, &err) == RLX_OK) {
    volatile uint8_t sink = 0; /* touch every byte: a wrong size shows under ASan */
    for (size_t i = 0; i < t.bytes; i++) sink ^= ((const uint8_t*)t.data)[i];
    (void)sink;
    rlx_host_free(&t);
  }
  return 0;
}

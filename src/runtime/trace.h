/* Per-step trace in Chrome trace-event JSON (RLX_TRACE=file.json or
 * rlx_exec_set_trace): every run of a traced executable adds one complete
 * event ("ph":"X", ts/dur in microseconds) per step, which Perfetto and
 * chrome://tracing load.
 *
 * One writer per path, shared by the whole process: every executable that
 * traces to the same path adds to the same in-memory event list (under the
 * file's mutex), and the file is rewritten whole, as valid JSON, when the
 * last executable tracing to it is destroyed and at process exit. So several
 * executables in one process end up in one file, each its own process row
 * ("pid") with one track ("tid") per stream or queue.
 *
 * The backends' run loops time the steps (each in its own way: CPU wall
 * clock, CUDA events, Vulkan timestamp queries, WebGPU per-step submissions)
 * and report them with rlx_trace_step; with tracing off their only cost is
 * the test of rlx_run_ctx.trace against NULL. */
#ifndef RLX_RUNTIME_TRACE_H
#define RLX_RUNTIME_TRACE_H

#include "base/error.h"
#include "passes/lower.h"

typedef struct rlx_trace_file rlx_trace_file;

/* What a run loop needs to report its steps (rlx_run_ctx.trace). */
typedef struct rlx_trace_run {
  rlx_trace_file* file;
  const char* backend;    /* the events' category */
  int32_t pid;            /* the executable's process row */
  int64_t run;            /* this executable's run count, from 0 */
  const rlx_graph* graph; /* names the steps' nodes */
} rlx_trace_run;

/* Tracks besides the streams/queues (tid 0, 1, ...): host fallback steps. */
enum { RLX_TRACE_TID_HOST = 99 };

/* The process-wide writer for `path`, opened (or shared) with one more
 * reference. A path that cannot be written fails here, naming it. */
rlx_status rlx_trace_open(const char* path, rlx_error* err, rlx_trace_file** out);
/* One more reference to f (a clone of a traced executable); returns f. */
rlx_trace_file* rlx_trace_retain(rlx_trace_file* f);
/* Drops a reference; the last one writes the file and frees the writer. */
void rlx_trace_release(rlx_trace_file* f);
/* A new process row named `label` (an executable), for rlx_trace_run.pid. */
int32_t rlx_trace_new_pid(rlx_trace_file* f, const char* label);

/* Microseconds on the trace's clock (monotonic, from the first trace). */
double rlx_trace_now_us(void);

/* One step's event: name "<op> (<variant>)" (variant NULL: the step's
 * kernel kind), args the step index, node label, output shape and dtype,
 * run index and `timing` (how the time was measured; NULL: omitted). */
void rlx_trace_step(const rlx_trace_run* tr, int32_t index, const rlx_step* s,
                    const char* variant, int32_t tid, double ts_us, double dur_us,
                    const char* timing);

#endif

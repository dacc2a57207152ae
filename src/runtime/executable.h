/* Internal access to a compiled executable (CLI `rlx dot --after`, tests). */
#ifndef RLX_RUNTIME_EXECUTABLE_H
#define RLX_RUNTIME_EXECUTABLE_H

#include "runtime/backend.h"

/* The graph after passes for the current binding (NULL until compiled). */
rlx_status rlx_exec_graph(const rlx_exec* e, const rlx_graph** out_graph);
/* The step list of the current binding (NULL until compiled). */
rlx_status rlx_exec_steps(const rlx_exec* e, const rlx_step_list** out_steps,
                          const rlx_plan** out_plan);
/* Device ms of the calling thread's last run on backend b (-1: none
 * measured), or -2 when b never measures device time. */
double rlx_device_last_run_ms(const rlx_backend* b);
/* Detail of a device ("available", "not built", "unavailable: ..."). */
const char* rlx_device_detail(const char* name);

#endif

/* LLM graph builders from a model config (see the rlx_llm_* section of
 * rlx.h). llm_config.c fills rlx_llm_config from config.json (json-c),
 * llm_build.c builds the forward graph with the public graph API and the
 * RoPE tables, llm.c loads a checkpoint folder and binds its weights. */
#ifndef RLX_LLM_LLM_H
#define RLX_LLM_LLM_H

#include "rlx.h"
#include "base/error.h"

/* Range checks shared by every source of a config (config.json now, GGUF
 * metadata later): sizes positive and bounded, heads dividing, a rope
 * scaling with usable factors. */
rlx_status rlx_llm_config_check(const rlx_llm_config* c, rlx_error* err);

/* Rows of the RoPE tables the options ask for (max_seq or its default). */
int64_t rlx_llm_table_rows(const rlx_llm_config* c, const rlx_llm_options* o);

/* Builds the forward graph; the message of a failure goes to err. */
rlx_status rlx_llm_build(const rlx_llm_config* c, const rlx_llm_options* o, rlx_graph** out,
                         rlx_error* err);

/* Fills *out with the message of err (malloc'd) when out is not NULL. */
rlx_status rlx_llm_report(rlx_status s, const rlx_error* err, char** out);

#endif

/* Pieces shared by the two modes of `rlx train` (train_text.c, the built-in
 * GPT on a text file; train_onnx.c, an exported model): the device, the
 * progress bar, the CSV log, the loss-curve picture. */
#ifndef RLX_TOOLS_TRAIN_UTIL_H
#define RLX_TOOLS_TRAIN_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "rlx.h"

int cmd_train_text(int argc, char** argv);
int cmd_train_onnx(int argc, char** argv);
/* rlx generate CHECKPOINT_DIR (generate_gpt.c; cmd_generate.c hands over). */
int cmd_generate_gpt(int argc, char** argv);

/* Resolves --device ("best" -> the first available) quietly; prints why a
 * device cannot be used. *out_name is a static string of the library. */
int train_resolve_device(const char* cmd, const char* device, const char** out_name);

/* Progress on stderr: one line redrawn in place on a terminal, a line every
 * `every` steps (and the last) otherwise. total_steps 0: the run is
 * bounded by time (budget_ms), and the ETA comes from that. */
typedef struct train_progress {
  int64_t total_steps;
  double budget_ms;
  double start_ms;
  double units_per_step; /* tokens or samples per step */
  const char* unit;      /* "tok/s" or "samples/s" */
  int tty;
  int64_t every;
  double last_draw_ms;
} train_progress;

void train_progress_init(train_progress* p, int64_t total_steps, double budget_ms,
                         double units_per_step, const char* unit);
/* val < 0: no validation loss yet. */
void train_progress_update(train_progress* p, int64_t step, float loss, float val);
/* Ends the line the bar was drawn on. */
void train_progress_end(train_progress* p);

/* A growable list of (step, loss) points, for the log and the plot. */
typedef struct train_curve {
  int64_t n, cap;
  int64_t* step;
  float* loss;
} train_curve;

int train_curve_add(train_curve* c, int64_t step, float loss);
void train_curve_free(train_curve* c);

/* The CSV log: header "step,loss", one row per step, flushed as it goes. */
FILE* train_log_open(const char* cmd, const char* path);
void train_log_row(FILE* f, int64_t step, float loss);

/* Writes the loss curve to path: a PNG drawn by gnuplot when path ends in
 * .png and gnuplot is installed, otherwise a text plot (to path, or to
 * path with .txt appended when a PNG was asked for and gnuplot is missing;
 * stderr says which). The text plot also goes to stderr when `show`. */
int train_write_plot(const char* cmd, const char* path, const train_curve* c, int show);
/* The text plot of the curve (width x height characters of plot area). */
void train_text_plot(FILE* f, const train_curve* c, int width, int height);

/* Mean of the last n points (fewer when the curve is shorter). */
float train_curve_tail_mean(const train_curve* c, int64_t n);

/* "1:05" / "12:34:56" into buf. */
const char* train_format_duration(double ms, char* buf, size_t cap);

/* mkdir -p for one level (the directory may exist). */
int train_make_dir(const char* cmd, const char* dir);

#endif

/* Shared pieces of `rlx train` (see train_util.h). */
#include "train_util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_common.h"

int train_resolve_device(const char* cmd, const char* device, const char** out_name) {
  const char* resolved = NULL;
  int quiet = cli_quiet_begin(); /* probing starts the drivers */
  rlx_status s = rlx_device_resolve(device, &resolved);
  cli_quiet_end(quiet);
  if (s == RLX_NOT_FOUND) {
    cli_error(cmd, "unknown device '%s' (see `rlx devices`)", device);
    return CLI_FAIL;
  }
  if (s != RLX_OK) {
    cli_error(cmd, "device '%s' cannot be used here (see `rlx devices`)", device);
    return CLI_FAIL;
  }
  *out_name = resolved;
  return CLI_OK;
}

/* ------------------------------------------------------------ progress */

void train_progress_init(train_progress* p, int64_t total_steps, double budget_ms,
                         double units_per_step, const char* unit) {
  memset(p, 0, sizeof *p);
  p->total_steps = total_steps;
  p->budget_ms = budget_ms;
  p->start_ms = cli_now_ms();
  p->units_per_step = units_per_step;
  p->unit = unit;
  p->tty = isatty(STDERR_FILENO);
  p->every = total_steps > 0 ? (total_steps + 19) / 20 : 50;
  if (p->every < 1) p->every = 1;
}

const char* train_format_duration(double ms, char* buf, size_t cap) {
  int64_t s = (int64_t)(ms / 1000.0 + 0.5);
  if (s < 0) s = 0;
  if (s >= 3600)
    snprintf(buf, cap, "%lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60),
             (long long)(s % 60));
  else
    snprintf(buf, cap, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

/* Fraction of the run done after `step` steps: by steps, or by time. */
static double progress_fraction(const train_progress* p, int64_t step, double elapsed) {
  double f = p->total_steps > 0 ? (double)step / (double)p->total_steps
                                : (p->budget_ms > 0 ? elapsed / p->budget_ms : 0);
  return f < 0 ? 0 : (f > 1 ? 1 : f);
}

void train_progress_update(train_progress* p, int64_t step, float loss, float val) {
  double now = cli_now_ms(), elapsed = now - p->start_ms;
  int last = p->total_steps > 0 && step >= p->total_steps;
  /* a terminal is redrawn at most 10 times a second; a log gets a line
   * every `every` steps */
  if (p->tty && !last && now - p->last_draw_ms < 100) return;
  if (!p->tty && !last && step % p->every != 0 && step != 1) return;
  p->last_draw_ms = now;
  double frac = progress_fraction(p, step, elapsed);
  double rate = elapsed > 0 ? (double)step * p->units_per_step / (elapsed / 1000.0) : 0;
  double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
  char bar[21], eta_s[32], val_s[32] = "";
  int filled = (int)(frac * 20 + 0.5);
  for (int i = 0; i < 20; i++) bar[i] = i < filled ? '#' : '.';
  bar[20] = '\0';
  if (val >= 0) snprintf(val_s, sizeof val_s, "  val %.3f", (double)val);
  char steps[48];
  if (p->total_steps > 0)
    snprintf(steps, sizeof steps, "%lld/%lld", (long long)step, (long long)p->total_steps);
  else
    snprintf(steps, sizeof steps, "%lld", (long long)step);
  fprintf(stderr, "%sstep %s [%s] loss %.4f%s  %.0f %s  ETA %s%s", p->tty ? "\r" : "", steps, bar,
          (double)loss, val_s, rate, p->unit, train_format_duration(eta, eta_s, sizeof eta_s),
          p->tty ? "\033[K" : "\n");
  fflush(stderr);
}

void train_progress_end(train_progress* p) {
  if (p->tty) fprintf(stderr, "\n");
}

/* ------------------------------------------------------------ curve, log */

int train_curve_add(train_curve* c, int64_t step, float loss) {
  if (c->n == c->cap) {
    int64_t cap = c->cap ? 2 * c->cap : 256;
    int64_t* s = realloc(c->step, sizeof *s * (size_t)cap);
    if (!s) return CLI_FAIL;
    c->step = s;
    float* l = realloc(c->loss, sizeof *l * (size_t)cap);
    if (!l) return CLI_FAIL;
    c->loss = l;
    c->cap = cap;
  }
  c->step[c->n] = step;
  c->loss[c->n] = loss;
  c->n++;
  return CLI_OK;
}

void train_curve_free(train_curve* c) {
  free(c->step);
  free(c->loss);
  memset(c, 0, sizeof *c);
}

float train_curve_tail_mean(const train_curve* c, int64_t n) {
  if (c->n == 0) return NAN;
  if (n > c->n) n = c->n;
  double s = 0;
  for (int64_t i = c->n - n; i < c->n; i++) s += c->loss[i];
  return (float)(s / (double)n);
}

FILE* train_log_open(const char* cmd, const char* path) {
  FILE* f = fopen(path, "w");
  if (!f) {
    cli_error(cmd, "--log %s: %s", path, strerror(errno));
    return NULL;
  }
  fprintf(f, "step,loss\n");
  return f;
}

void train_log_row(FILE* f, int64_t step, float loss) {
  if (!f) return;
  /* %.9g: every f32 loss reads back exactly */
  fprintf(f, "%lld,%.9g\n", (long long)step, (double)loss);
  fflush(f);
}

int train_make_dir(const char* cmd, const char* dir) {
  if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return CLI_OK;
    cli_error(cmd, "%s exists and is not a directory", dir);
    return CLI_FAIL;
  }
  cli_error(cmd, "cannot create %s: %s", dir, strerror(errno));
  return CLI_FAIL;
}

/* ------------------------------------------------------------ plots */

/* The curve averaged into `width` buckets by step, so a long run's noise
 * does not fill the picture. */
static void bucket_means(const train_curve* c, int width, double* mean, int* count) {
  for (int x = 0; x < width; x++) {
    mean[x] = 0;
    count[x] = 0;
  }
  int64_t first = c->step[0], last = c->step[c->n - 1];
  double span = last > first ? (double)(last - first) : 1;
  for (int64_t i = 0; i < c->n; i++) {
    if (!isfinite(c->loss[i])) continue;
    int x = (int)((double)(c->step[i] - first) / span * (width - 1) + 0.5);
    mean[x] += c->loss[i];
    count[x]++;
  }
  for (int x = 0; x < width; x++)
    if (count[x]) mean[x] /= count[x];
}

void train_text_plot(FILE* f, const train_curve* c, int width, int height) {
  if (c->n == 0 || width < 2 || height < 2 || width > 200 || height > 100) return;
  double mean[200];
  int count[200];
  bucket_means(c, width, mean, count);
  double lo = INFINITY, hi = -INFINITY;
  for (int x = 0; x < width; x++)
    if (count[x]) {
      lo = mean[x] < lo ? mean[x] : lo;
      hi = mean[x] > hi ? mean[x] : hi;
    }
  if (!isfinite(lo)) return;
  if (hi - lo < 1e-6) hi = lo + 1e-6;
  fprintf(f, "loss (mean per column) by step\n");
  for (int y = height - 1; y >= 0; y--) {
    double level = lo + (hi - lo) * y / (height - 1);
    fprintf(f, "%8.3f |", level);
    for (int x = 0; x < width; x++) {
      int row = count[x] ? (int)((mean[x] - lo) / (hi - lo) * (height - 1) + 0.5) : -1;
      fputc(row == y ? '*' : ' ', f);
    }
    fputc('\n', f);
  }
  fprintf(f, "         +");
  for (int x = 0; x < width; x++) fputc('-', f);
  fprintf(f, "\n          step %lld%*s%lld\n", (long long)c->step[0],
          width - 12 > 0 ? width - 12 : 1, "", (long long)c->step[c->n - 1]);
}

static int ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Whether `gnuplot` is on PATH (without running it). */
static int have_gnuplot(void) {
  const char* path = getenv("PATH");
  if (!path) return 0;
  char* copy = strdup(path);
  int found = 0;
  for (char* dir = strtok(copy, ":"); dir && !found; dir = strtok(NULL, ":")) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/gnuplot", dir);
    found = access(buf, X_OK) == 0;
  }
  free(copy);
  return found;
}

/* Draws the curve into a PNG with gnuplot; the data goes in through its
 * stdin, so no temporary file is left behind. */
static int gnuplot_png(const char* cmd, const char* path, const train_curve* c) {
  if (strchr(path, '"') || strchr(path, '\\')) {
    cli_error(cmd, "--plot %s: a path with quotes or backslashes cannot go to gnuplot", path);
    return CLI_FAIL;
  }
  FILE* gp = popen("gnuplot", "w");
  if (!gp) {
    cli_error(cmd, "cannot start gnuplot: %s", strerror(errno));
    return CLI_FAIL;
  }
  fprintf(gp,
          "set terminal pngcairo size 800,480 noenhanced\n"
          "set output \"%s\"\n"
          "set title \"rlx train: loss by step\"\n"
          "set xlabel \"step\"\nset ylabel \"loss\"\nset grid\nset key off\n"
          "plot '-' with lines lw 2\n",
          path);
  for (int64_t i = 0; i < c->n; i++)
    fprintf(gp, "%lld %.9g\n", (long long)c->step[i], (double)c->loss[i]);
  fprintf(gp, "e\n");
  int status = pclose(gp);
  if (status != 0) {
    cli_error(cmd, "gnuplot failed drawing %s (exit status %d)", path,
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return CLI_FAIL;
  }
  return CLI_OK;
}

int train_write_plot(const char* cmd, const char* path, const train_curve* c, int show) {
  if (c->n == 0) return CLI_OK;
  if (show) train_text_plot(stderr, c, 60, 12);
  int png = ends_with(path, ".png");
  if (png && have_gnuplot()) {
    if (gnuplot_png(cmd, path, c) != CLI_OK) return CLI_FAIL;
    fprintf(stderr, "loss curve: %s (gnuplot)\n", path);
    return CLI_OK;
  }
  char text_path[4096];
  snprintf(text_path, sizeof text_path, "%s%s", path, png ? ".txt" : "");
  FILE* f = fopen(text_path, "w");
  if (!f) {
    cli_error(cmd, "--plot %s: %s", text_path, strerror(errno));
    return CLI_FAIL;
  }
  train_text_plot(f, c, 72, 20);
  fclose(f);
  fprintf(stderr, "loss curve: %s (text plot%s)\n", text_path,
          png ? "; install gnuplot for a PNG" : "");
  return CLI_OK;
}

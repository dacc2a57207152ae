/* Chrome trace-event writer (see trace.h for the design). */
#include "runtime/trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "ir/graph.h"
#include "rlx.h"

/* Past this many events a file stops growing (a long benchmark under
 * RLX_TRACE would otherwise hold every run in memory); the dropped count is
 * written into the file's otherData. */
#define MAX_EVENTS (4 << 20)

typedef struct track {
  int32_t pid, tid;
} track;

struct rlx_trace_file {
  char* path;
  int refs;              /* under g_lock */
  rlx_trace_file* next;  /* the open files, under g_lock */
  pthread_mutex_t lock;  /* the fields below */
  rlx_buf events;        /* the events' JSON, comma-separated */
  int64_t n_events, dropped;
  int32_t next_pid;
  track* tracks;         /* (pid, tid) pairs already named */
  int32_t n_tracks, cap_tracks;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static rlx_trace_file* g_files;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static struct timespec g_origin;

/* ------------------------------------------------------------ clock, JSON */

static void write_all_at_exit(void);

static void init_once(void) {
  clock_gettime(CLOCK_MONOTONIC, &g_origin);
  atexit(write_all_at_exit);
}

double rlx_trace_now_us(void) {
  pthread_once(&g_once, init_once);
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)(t.tv_sec - g_origin.tv_sec) * 1e6 + (double)(t.tv_nsec - g_origin.tv_nsec) * 1e-3;
}

/* s as a JSON string (quoted, escaped). */
static void put_json_str(rlx_buf* b, const char* s) {
  rlx_buf_puts(b, "\"");
  for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
    if (*p == '"' || *p == '\\') rlx_buf_printf(b, "\\%c", *p);
    else if (*p < 0x20) rlx_buf_printf(b, "\\u%04x", *p);
    else rlx_buf_add(b, p, 1);
  }
  rlx_buf_puts(b, "\"");
}

/* Starts the next event in f->events (the separator). */
static void begin_event(rlx_trace_file* f) {
  if (f->n_events++) rlx_buf_puts(&f->events, ",\n");
}

/* ------------------------------------------------------------ files */

/* The whole file from the events so far: valid JSON whenever it is called. */
static int write_file(rlx_trace_file* f) {
  FILE* out = fopen(f->path, "w");
  if (!out) return 0;
  fputs("{\"traceEvents\":[\n", out);
  if (f->events.p && !f->events.oom) fputs(f->events.p, out);
  fprintf(out, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"rlx %s\","
               "\"dropped_events\":%lld,\"out_of_memory\":%d}}\n",
          rlx_version(), (long long)f->dropped, f->events.oom);
  return fclose(out) == 0;
}

static void write_all_at_exit(void) {
  pthread_mutex_lock(&g_lock);
  for (rlx_trace_file* f = g_files; f; f = f->next) {
    pthread_mutex_lock(&f->lock);
    write_file(f);
    pthread_mutex_unlock(&f->lock);
  }
  pthread_mutex_unlock(&g_lock);
}

static rlx_trace_file* find_open(const char* path) {
  for (rlx_trace_file* f = g_files; f; f = f->next)
    if (!strcmp(f->path, path)) return f;
  return NULL;
}

static void free_file(rlx_trace_file* f) {
  pthread_mutex_destroy(&f->lock);
  rlx_buf_free(&f->events);
  free(f->tracks);
  free(f->path);
  free(f);
}

static rlx_status new_file(const char* path, rlx_error* err, rlx_trace_file** out) {
  rlx_trace_file* f = calloc(1, sizeof *f);
  RLX_CHECK_ALLOC(err, f);
  size_t n = strlen(path) + 1;
  f->path = malloc(n);
  if (!f->path) {
    free(f);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  memcpy(f->path, path, n);
  pthread_mutex_init(&f->lock, NULL);
  f->next_pid = 1;
  /* Written now (empty), so a path that cannot be written fails at once. */
  if (!write_file(f)) {
    int e = errno;
    free_file(f);
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "trace: cannot write '%s': %s", path, strerror(e));
  }
  *out = f;
  return RLX_OK;
}

rlx_status rlx_trace_open(const char* path, rlx_error* err, rlx_trace_file** out) {
  *out = NULL;
  if (!path || !*path) return rlx_fail(err, RLX_INVALID_ARGUMENT, "trace: empty path");
  pthread_once(&g_once, init_once);
  pthread_mutex_lock(&g_lock);
  rlx_status s = RLX_OK;
  rlx_trace_file* f = find_open(path);
  if (!f) {
    s = new_file(path, err, &f);
    if (s == RLX_OK) {
      f->next = g_files;
      g_files = f;
    }
  }
  if (s == RLX_OK) {
    f->refs++;
    *out = f;
  }
  pthread_mutex_unlock(&g_lock);
  return s;
}

rlx_trace_file* rlx_trace_retain(rlx_trace_file* f) {
  if (!f) return NULL;
  pthread_mutex_lock(&g_lock);
  f->refs++;
  pthread_mutex_unlock(&g_lock);
  return f;
}

void rlx_trace_release(rlx_trace_file* f) {
  if (!f) return;
  pthread_mutex_lock(&g_lock);
  int last = --f->refs == 0;
  if (last) {
    rlx_trace_file** at = &g_files;
    while (*at != f) at = &(*at)->next;
    *at = f->next;
  }
  pthread_mutex_unlock(&g_lock);
  if (!last) return;
  /* Nothing else can reach f now: write it once more, the final time. */
  write_file(f);
  free_file(f);
}

int32_t rlx_trace_new_pid(rlx_trace_file* f, const char* label) {
  pthread_mutex_lock(&f->lock);
  int32_t pid = f->next_pid++;
  begin_event(f);
  rlx_buf_printf(&f->events, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                             "\"args\":{\"name\":", pid);
  put_json_str(&f->events, label);
  rlx_buf_puts(&f->events, "}}");
  pthread_mutex_unlock(&f->lock);
  return pid;
}

/* ------------------------------------------------------------ events */

/* Names track (pid, tid) the first time an event lands on it. Under f->lock. */
static void name_track(rlx_trace_file* f, const rlx_trace_run* tr, int32_t tid) {
  for (int32_t i = 0; i < f->n_tracks; i++)
    if (f->tracks[i].pid == tr->pid && f->tracks[i].tid == tid) return;
  if (f->n_tracks == f->cap_tracks) {
    int32_t cap = f->cap_tracks ? f->cap_tracks * 2 : 8;
    track* grown = realloc(f->tracks, sizeof *grown * (size_t)cap);
    if (!grown) return; /* the track stays unnamed: only its label is lost */
    f->tracks = grown;
    f->cap_tracks = cap;
  }
  f->tracks[f->n_tracks++] = (track){tr->pid, tid};
  begin_event(f);
  rlx_buf_printf(&f->events, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                             "\"args\":{\"name\":\"", tr->pid, tid);
  if (tid == RLX_TRACE_TID_HOST) rlx_buf_printf(&f->events, "%s host fallback\"}}", tr->backend);
  else rlx_buf_printf(&f->events, "%s stream %d\"}}", tr->backend, tid);
}

/* "<op> (<variant>)" for step s. */
static void put_event_name(rlx_buf* b, const rlx_trace_run* tr, const rlx_step* s,
                           const char* variant) {
  const rlx_graph* g = tr->graph;
  const char* op = "step";
  if (g && s->node >= 0 && s->node < g->n_nodes)
    op = rlx_op_name(g->nodes[s->node].op, g->nodes[s->node].a.kind);
  char name[160];
  snprintf(name, sizeof name, "%s (%s)", op, variant ? variant : rlx_kernel_name(s->kernel));
  put_json_str(b, name);
}

static void put_args(rlx_buf* b, const rlx_trace_run* tr, int32_t index, const rlx_step* s,
                     const char* timing) {
  const rlx_graph* g = tr->graph;
  rlx_buf_printf(b, "{\"step\":%d,\"run\":%lld,\"node\":%d", index, (long long)tr->run, s->node);
  if (g && s->node >= 0 && s->node < g->n_nodes && g->nodes[s->node].label) {
    rlx_buf_puts(b, ",\"label\":");
    put_json_str(b, g->nodes[s->node].label);
  }
  if (s->n_out > 0 && s->out[0].rank >= 0) {
    rlx_buf_puts(b, ",\"shape\":[");
    for (int32_t d = 0; d < s->out[0].rank; d++)
      rlx_buf_printf(b, "%s%lld", d ? "," : "", (long long)s->out[0].shape[d]);
    rlx_buf_printf(b, "],\"dtype\":\"%s\"", rlx_dtype_name(s->out[0].dtype));
  }
  if (timing) {
    rlx_buf_puts(b, ",\"timing\":");
    put_json_str(b, timing);
  }
  rlx_buf_puts(b, "}");
}

void rlx_trace_step(const rlx_trace_run* tr, int32_t index, const rlx_step* s,
                    const char* variant, int32_t tid, double ts_us, double dur_us,
                    const char* timing) {
  rlx_trace_file* f = tr->file;
  if (dur_us < 0) dur_us = 0; /* clock skew between two devices' readings */
  pthread_mutex_lock(&f->lock);
  if (f->n_events >= MAX_EVENTS) {
    f->dropped++;
    pthread_mutex_unlock(&f->lock);
    return;
  }
  name_track(f, tr, tid);
  begin_event(f);
  rlx_buf* b = &f->events;
  rlx_buf_puts(b, "{\"name\":");
  put_event_name(b, tr, s, variant);
  rlx_buf_printf(b, ",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                    "\"args\":", tr->backend, tr->pid, tid, ts_us, dur_us);
  put_args(b, tr, index, s, timing);
  rlx_buf_puts(b, "}");
  pthread_mutex_unlock(&f->lock);
}

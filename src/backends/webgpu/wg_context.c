/* The process-wide WebGPU context: Dawn loaded with dlopen, one instance,
 * adapter and device (with the adapter's limits and, when offered,
 * shader-f16 and subgroups), one bind-group layout shared by every kernel,
 * and the compute pipelines, built from the embedded WGSL on first use.
 *
 * Library lookup: env RLX_WG_LIB, else the copy scripts/setup_webgpu.sh
 * unpacks into <repo>/third_party, else the loader's search path. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/env.h"
#include "backends/webgpu/wg_internal.h"

#ifndef RLX_WEBGPU_DEFAULT_LIB
#define RLX_WEBGPU_DEFAULT_LIB "third_party/bun-webgpu-linux-x64/libwebgpu_wrapper.so"
#endif

_Static_assert(sizeof(WGPULimits) == 152, "WGPULimits layout of this Dawn build");
_Static_assert(sizeof(WGPUDeviceDescriptor) == 144, "WGPUDeviceDescriptor layout");
_Static_assert(sizeof(WGPUBindGroupLayoutEntry) == 120, "WGPUBindGroupLayoutEntry layout");
_Static_assert(sizeof(WGPUBufferDescriptor) == 48, "WGPUBufferDescriptor layout");
_Static_assert(sizeof(WGPUComputePipelineDescriptor) == 80, "WGPUComputePipelineDescriptor layout");

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static rlx_wg_context* g_ctx;
static char g_reason[256];

static WGPUStringView sv(const char* s) { return (WGPUStringView){s, strlen(s)}; }

static void set_reason(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_reason(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_reason, sizeof g_reason, fmt, ap);
  va_end(ap);
}

/* ------------------------------------------------------------ callbacks */

typedef struct request_result {
  uint32_t status;
  void* object;
  char message[200];
} request_result;

static void copy_message(char* dst, size_t cap, WGPUStringView m) {
  size_t n = m.data ? (m.length == WGPU_STRLEN ? strlen(m.data) : m.length) : 0;
  if (n >= cap) n = cap - 1;
  if (n) memcpy(dst, m.data, n);
  dst[n] = 0;
}

static void on_adapter(uint32_t status, WGPUAdapter a, WGPUStringView msg, void* u1, void* u2) {
  (void)u2;
  request_result* r = u1;
  r->status = status;
  r->object = a;
  copy_message(r->message, sizeof r->message, msg);
}

static void on_device(uint32_t status, WGPUDevice d, WGPUStringView msg, void* u1, void* u2) {
  (void)u2;
  request_result* r = u1;
  r->status = status;
  r->object = d;
  copy_message(r->message, sizeof r->message, msg);
}

/* Errors outside any scope (there should be none) go to stderr when
 * RLX_WG_VERBOSE is set; scoped errors are returned to the caller. */
static void on_uncaptured(const WGPUDevice* d, uint32_t type, WGPUStringView msg, void* u1,
                          void* u2) {
  (void)d; (void)u1; (void)u2;
  if (rlx_env_flag(RLX_ENV_WG_VERBOSE)) {
    char m[512];
    copy_message(m, sizeof m, msg);
    fprintf(stderr, "webgpu: uncaptured error %u: %s\n", type, m);
  }
}

/* Dawn's own log (RLX_WG_VERBOSE): warnings, and the shaders with the
 * dump_shaders toggle (RLX_WG_TOGGLES=...,dump_shaders). */
static void on_log(uint32_t type, WGPUStringView msg, void* u1, void* u2) {
  (void)u1; (void)u2;
  size_t n = msg.data ? (msg.length == WGPU_STRLEN ? strlen(msg.data) : msg.length) : 0;
  fprintf(stderr, "dawn log %u: %.*s\n", type, (int)n, msg.data ? msg.data : "");
}

static void on_lost(const WGPUDevice* d, uint32_t reason, WGPUStringView msg, void* u1, void* u2) {
  (void)d; (void)reason; (void)msg; (void)u1; (void)u2;
}

/* ------------------------------------------------------------ loading */

static int load_library(rlx_wg_context* c) {
  const char* env = rlx_env_str(RLX_ENV_WG_LIB);
  const char* tried[3] = {env, RLX_WEBGPU_DEFAULT_LIB, "libwebgpu_wrapper.so"};
  char first_error[200] = "";
  for (int i = 0; i < 3 && !c->lib; i++) {
    if (!tried[i] || !tried[i][0]) continue;
    c->lib = dlopen(tried[i], RTLD_NOW | RTLD_LOCAL);
    if (!c->lib && !first_error[0]) snprintf(first_error, sizeof first_error, "%s", dlerror());
    if (env && i == 0 && !c->lib) break; /* an explicit path that fails is the answer */
  }
  if (!c->lib) {
    set_reason("no Dawn library (%s; run scripts/setup_webgpu.sh or set RLX_WG_LIB)",
               first_error[0] ? first_error : "not found");
    return 0;
  }
#define RLX_WGPU_LOAD(ret, name, params)                      \
  *(void**)&c->f.name = dlsym(c->lib, #name);                 \
  if (!c->f.name) {                                           \
    set_reason("the Dawn library lacks %s (wrong build?)", #name); \
    return 0;                                                 \
  }
  RLX_WGPU_FNS(RLX_WGPU_LOAD)
#undef RLX_WGPU_LOAD
  *(void**)&c->device_tick = dlsym(c->lib, "wgpuDeviceTick");
  return 1;
}

static int wait_future(rlx_wg_context* c, WGPUFuture f) {
  WGPUFutureWaitInfo w = {f, 0};
  uint32_t st = c->f.wgpuInstanceWaitAny(c->instance, 1, &w, UINT64_MAX);
  return st == WGPU_WAIT_STATUS_SUCCESS && w.completed;
}

static int open_adapter(rlx_wg_context* c) {
  WGPUInstanceDescriptor id;
  memset(&id, 0, sizeof id);
  id.features.timedWaitAnyEnable = 1;
  c->instance = c->f.wgpuCreateInstance(&id);
  if (!c->instance) { set_reason("wgpuCreateInstance failed"); return 0; }
  WGPURequestAdapterOptions o;
  memset(&o, 0, sizeof o);
  o.featureLevel = WGPU_FEATURE_LEVEL_CORE;
  o.backendType = WGPU_BACKEND_VULKAN;
  request_result r = {0, NULL, ""};
  WGPUCallbackInfo cb = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, (void*)on_adapter, &r, NULL};
  if (!wait_future(c, c->f.wgpuInstanceRequestAdapter(c->instance, &o, cb)) || !r.object) {
    set_reason("no WebGPU adapter through Vulkan%s%s (on CPU-only machines Dawn needs Mesa 25 "
               "lavapipe: VK_DRIVER_FILES=third_party/mesa25/lvp_icd.json)",
               r.message[0] ? ": " : "", r.message);
    return 0;
  }
  c->adapter = r.object;
  WGPUAdapterInfo info;
  memset(&info, 0, sizeof info);
  if (c->f.wgpuAdapterGetInfo(c->adapter, &info) == WGPU_STATUS_SUCCESS) {
    char dev[128];
    copy_message(dev, sizeof dev, info.device);
    snprintf(c->adapter_name, sizeof c->adapter_name, "%s", dev[0] ? dev : "unnamed adapter");
    /* a spinning thread would take a core from a CPU device's own workers */
    c->cpu_adapter = info.adapterType == WGPU_ADAPTER_TYPE_CPU;
    c->spin_waits =
        info.adapterType != WGPU_ADAPTER_TYPE_CPU && !rlx_env_is(RLX_ENV_WG_WAIT, "block");
    c->subgroup_min = info.subgroupMinSize;
    c->subgroup_max = info.subgroupMaxSize;
    c->f.wgpuAdapterInfoFreeMembers(info);
  }
  return 1;
}

/* Dawn device toggles, unless RLX_WG_SAFE=1 (Dawn's defaults: robust
 * accesses, validation):
 *  - disable_robustness: Tint no longer clamps every buffer and array index.
 *    The kernels bound their own accesses (views are checked against the
 *    arena window on the host), as the Vulkan backend does without
 *    robustBufferAccess.
 *  - disable_workgroup_init: no zero-fill of workgroup memory at the start
 *    of every workgroup; every kernel writes its workgroup memory before
 *    reading it.
 *  - skip_validation: Dawn stops validating each command on the CPU; the
 *    commands come from plans checked at compile time.
 * RLX_WG_TOGGLES=a,b replaces the list (measurements; empty: none). Each
 * takes effect (Dawn's dump_shaders toggle shows the index clamps and the
 * workgroup zero-initialisers gone); on the H100 (2026-11-23) the three took
 * softmax 16384x4096 from 0.307 to 0.26 ms and GEMV 1x4096x4096 from 0.088 to
 * 0.083 ms (with polling waits). */
#define DEFAULT_TOGGLES "disable_robustness,disable_workgroup_init,skip_validation"
enum { MAX_TOGGLES = 8 };

/* Splits the comma-separated list into names (pointing into buf). */
static size_t split_toggles(const char* list, char* buf, size_t cap, const char** names) {
  snprintf(buf, cap, "%s", list);
  size_t n = 0;
  for (char* p = buf; *p && n < MAX_TOGGLES;) {
    char* comma = strchr(p, ',');
    if (comma) *comma = 0;
    if (*p) names[n++] = p;
    if (!comma) break;
    p = comma + 1;
  }
  return n;
}

typedef struct toggles_chain {
  WGPUDawnTogglesDescriptor desc;
  char buf[160];
  const char* names[MAX_TOGGLES];
} toggles_chain;

/* Chooses c->toggles and chains them on the device descriptor (nothing
 * chained when there are none). */
static void chain_toggles(rlx_wg_context* c, WGPUDeviceDescriptor* dd, toggles_chain* t) {
  const char* env = rlx_env_str(RLX_ENV_WG_TOGGLES);
  const char* list = env ? env : rlx_env_flag(RLX_ENV_WG_SAFE) ? "" : DEFAULT_TOGGLES;
  snprintf(c->toggles, sizeof c->toggles, "%s", list);
  /* RLX_TRACE times steps with timestamps written between passes, which
   * Dawn allows only with allow_unsafe_apis: on for traced processes alone
   * (rlx_exec_set_trace without RLX_TRACE: host-clock step times). */
  const char* trace = rlx_env_str(RLX_ENV_TRACE);
  if (c->has_timestamps && trace && *trace && !strstr(c->toggles, "allow_unsafe_apis")) {
    size_t n = strlen(c->toggles);
    snprintf(c->toggles + n, sizeof c->toggles - n, "%sallow_unsafe_apis", n ? "," : "");
  }
  memset(&t->desc, 0, sizeof t->desc);
  t->desc.chain.sType = WGPU_STYPE_DAWN_TOGGLES_DESCRIPTOR;
  t->desc.enabledToggleCount = split_toggles(c->toggles, t->buf, sizeof t->buf, t->names);
  t->desc.enabledToggles = t->names;
  /* Traced steps' times need the timer's full precision (Dawn may round
   * timestamps to blur timing side channels; nothing else reads them). */
  static const char* const unquantized[] = {"timestamp_quantization"};
  if (c->has_timestamps) {
    t->desc.disabledToggleCount = 1;
    t->desc.disabledToggles = unquantized;
  }
  if (t->desc.enabledToggleCount || t->desc.disabledToggleCount) dd->nextInChain = &t->desc.chain;
}

static int open_device(rlx_wg_context* c) {
  WGPULimits lim;
  memset(&lim, 0, sizeof lim);
  if (c->f.wgpuAdapterGetLimits(c->adapter, &lim) != WGPU_STATUS_SUCCESS) {
    set_reason("wgpuAdapterGetLimits failed");
    return 0;
  }
  c->has_f16 = c->f.wgpuAdapterHasFeature(c->adapter, WGPU_FEATURE_SHADER_F16) != 0;
  c->has_subgroups = c->f.wgpuAdapterHasFeature(c->adapter, WGPU_FEATURE_SUBGROUPS) != 0;
  c->has_timestamps = c->f.wgpuAdapterHasFeature(c->adapter, WGPU_FEATURE_TIMESTAMP_QUERY) != 0;
  uint32_t feats[3];
  size_t nf = 0;
  if (c->has_f16) feats[nf++] = WGPU_FEATURE_SHADER_F16;
  if (c->has_subgroups) feats[nf++] = WGPU_FEATURE_SUBGROUPS;
  if (c->has_timestamps) feats[nf++] = WGPU_FEATURE_TIMESTAMP_QUERY; /* RLX_TRACE's step times */
  WGPUDeviceDescriptor dd;
  memset(&dd, 0, sizeof dd);
  dd.label = sv("rlx");
  dd.requiredFeatureCount = nf;
  dd.requiredFeatures = feats;
  dd.requiredLimits = &lim; /* everything the adapter offers */
  dd.deviceLostCallbackInfo.mode = WGPU_CALLBACK_MODE_ALLOW_PROCESS_EVENTS;
  dd.deviceLostCallbackInfo.callback = (void*)on_lost;
  dd.uncapturedErrorCallbackInfo.callback = (void*)on_uncaptured;
  toggles_chain toggles;
  chain_toggles(c, &dd, &toggles);
  request_result r = {0, NULL, ""};
  WGPUCallbackInfo cb = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, (void*)on_device, &r, NULL};
  if (!wait_future(c, c->f.wgpuAdapterRequestDevice(c->adapter, &dd, cb)) || !r.object) {
    set_reason("requestDevice failed%s%s", r.message[0] ? ": " : "", r.message);
    return 0;
  }
  c->device = r.object;
  c->queue = c->f.wgpuDeviceGetQueue(c->device);
  if (rlx_env_flag(RLX_ENV_WG_VERBOSE))
    c->f.wgpuDeviceSetLoggingCallback(c->device,
                                      (WGPULoggingCallbackInfo){NULL, (void*)on_log, NULL, NULL});
  c->use_f16 = c->has_f16 && !rlx_env_flag(RLX_ENV_WG_NO_F16);
  c->use_subgroups = c->has_subgroups && !rlx_env_flag(RLX_ENV_WG_NO_SUBGROUPS);
  memset(&c->limits, 0, sizeof c->limits);
  if (c->f.wgpuDeviceGetLimits(c->device, &c->limits) != WGPU_STATUS_SUCCESS) c->limits = lim;
  return 1;
}

/* Arena window: the binding limit (a multiple of 4 below 4 GiB: kernels use
 * 32-bit byte offsets), or RLX_WG_MAX_BINDING to force small windows. */
static void choose_window(rlx_wg_context* c) {
  uint64_t w = c->limits.maxStorageBufferBindingSize;
  if (w > 0xfffff000ull) w = 0xfffff000ull;
  int64_t forced = rlx_env_int(RLX_ENV_WG_MAX_BINDING);
  if (forced >= 4096 && (uint64_t)forced < w) w = (uint64_t)forced;
  c->offset_align = c->limits.minStorageBufferOffsetAlignment ? c->limits.minStorageBufferOffsetAlignment : 256;
  w &= ~(uint64_t)(c->offset_align - 1);
  c->max_binding = w;
}

static int make_layout(rlx_wg_context* c) {
  WGPUBindGroupLayoutEntry e[3];
  memset(e, 0, sizeof e);
  for (uint32_t i = 0; i < 3; i++) {
    e[i].binding = i;
    e[i].visibility = WGPU_SHADER_STAGE_COMPUTE;
  }
  e[0].buffer.type = WGPU_BUFFER_BINDING_STORAGE; /* arena window */
  e[0].buffer.hasDynamicOffset = 1;
  e[1].buffer.type = WGPU_BUFFER_BINDING_READ_ONLY_STORAGE; /* step record */
  e[1].buffer.hasDynamicOffset = 1;
  e[1].buffer.minBindingSize = RLX_WG_REC_WORDS * 4;
  e[2].buffer.type = WGPU_BUFFER_BINDING_STORAGE; /* run state */
  e[2].buffer.minBindingSize = RLX_WG_RUN_WORDS * 4;
  WGPUBindGroupLayoutDescriptor bd;
  memset(&bd, 0, sizeof bd);
  bd.entryCount = 3;
  bd.entries = e;
  c->bgl = c->f.wgpuDeviceCreateBindGroupLayout(c->device, &bd);
  if (!c->bgl) { set_reason("cannot create the bind group layout"); return 0; }
  WGPUPipelineLayoutDescriptor pd;
  memset(&pd, 0, sizeof pd);
  pd.bindGroupLayoutCount = 1;
  pd.bindGroupLayouts = &c->bgl;
  c->layout = c->f.wgpuDeviceCreatePipelineLayout(c->device, &pd);
  if (!c->layout) { set_reason("cannot create the pipeline layout"); return 0; }
  return 1;
}

static rlx_wg_context* g_half_made;

static void context_init(void) {
  rlx_wg_context* c = calloc(1, sizeof *c);
  if (!c) { set_reason("out of host memory"); return; }
  pthread_mutex_init(&c->lock, NULL);
  if (!load_library(c) || !open_adapter(c) || !open_device(c) || !make_layout(c)) {
    /* Dawn objects of a half-made context are left to process exit (Dawn
     * callbacks may still hold c as user data), kept reachable so it is not
     * a leak: the library stays loaded and nothing else refers to them. */
    g_half_made = c;
    return;
  }
  choose_window(c);
  g_ctx = c;
}

rlx_wg_context* rlx_wg_context_get(char* reason, size_t cap) {
  pthread_once(&g_once, context_init);
  if (!g_ctx && reason) snprintf(reason, cap, "%s", g_reason[0] ? g_reason : "unavailable");
  return g_ctx;
}

/* ------------------------------------------------------------ scopes, waits, buffers */

typedef struct scope_result {
  uint32_t status, type;
  char message[400];
} scope_result;

static void on_pop(uint32_t status, uint32_t type, WGPUStringView msg, void* u1, void* u2) {
  (void)u2;
  scope_result* r = u1;
  r->status = status;
  r->type = type;
  copy_message(r->message, sizeof r->message, msg);
}

void rlx_wg_scope_push(rlx_wg_context* c) {
  c->f.wgpuDevicePushErrorScope(c->device, WGPU_ERROR_FILTER_OUT_OF_MEMORY);
  c->f.wgpuDevicePushErrorScope(c->device, WGPU_ERROR_FILTER_VALIDATION);
}

rlx_status rlx_wg_scope_pop(rlx_wg_context* c, rlx_error* err, const char* what) {
  rlx_status s = RLX_OK;
  for (int k = 0; k < 2; k++) { /* validation first (pushed last), then out-of-memory */
    scope_result r = {0, 0, ""};
    WGPUCallbackInfo cb = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, (void*)on_pop, &r, NULL};
    if (!wait_future(c, c->f.wgpuDevicePopErrorScope(c->device, cb)) && s == RLX_OK)
      s = rlx_fail(err, RLX_INTERNAL, "webgpu: %s: error scope lost", what);
    if (s == RLX_OK && r.type != WGPU_ERROR_TYPE_NO_ERROR && r.type != 0)
      s = rlx_fail(err, k == 0 ? RLX_INTERNAL : RLX_RESOURCE_EXHAUSTED, "webgpu: %s: %s", what,
                   r.message[0] ? r.message : "error");
  }
  return s;
}

rlx_status rlx_wg_wait(rlx_wg_context* c, WGPUFuture fut, rlx_error* err, const char* what) {
  if (wait_future(c, fut)) return RLX_OK;
  return rlx_fail(err, RLX_INTERNAL, "webgpu: waiting for %s failed", what);
}

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* On the H100 (2026-11-23) polling took the fixed cost of a run (add f32
 * 4K) from 0.058 to 0.034 ms, as in the Vulkan backend's fence waits. */
rlx_status rlx_wg_wait_gpu(rlx_wg_context* c, WGPUFuture fut, rlx_error* err, const char* what) {
  if (c->spin_waits) {
    double until = seconds_now() + 2e-3;
    do {
      WGPUFutureWaitInfo w = {fut, 0};
      uint32_t st = c->f.wgpuInstanceWaitAny(c->instance, 1, &w, 0);
      if (st == WGPU_WAIT_STATUS_SUCCESS && w.completed) return RLX_OK;
      if (st != WGPU_WAIT_STATUS_SUCCESS && st != WGPU_WAIT_STATUS_TIMED_OUT) break;
    } while (seconds_now() < until);
  }
  return rlx_wg_wait(c, fut, err, what);
}

static void on_work_done(uint32_t status, void* u1, void* u2) {
  (void)status; (void)u1; (void)u2;
}

/* Dawn frees a destroyed buffer's memory only once the GPU work submitted
 * before it has finished and the device has ticked: wait for the queue,
 * then tick the device (Dawn's wgpuDeviceTick) so it runs its deferred
 * deletions. */
static void reclaim_destroyed_buffers(rlx_wg_context* c) {
  /* Dawn queues a deletion at the serial of the next submission: submit an
   * empty command buffer, wait for the queue, tick (which deletes). */
  WGPUCommandEncoder enc = c->f.wgpuDeviceCreateCommandEncoder(c->device, NULL);
  WGPUCommandBuffer empty = enc ? c->f.wgpuCommandEncoderFinish(enc, NULL) : NULL;
  if (enc) c->f.wgpuCommandEncoderRelease(enc);
  if (empty) {
    c->f.wgpuQueueSubmit(c->queue, 1, &empty);
    c->f.wgpuCommandBufferRelease(empty);
  }
  WGPUCallbackInfo cb = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, (void*)on_work_done, NULL, NULL};
  wait_future(c, c->f.wgpuQueueOnSubmittedWorkDone(c->queue, cb));
  if (c->device_tick) c->device_tick(c->device);
  c->f.wgpuInstanceProcessEvents(c->instance);
}

static WGPUBuffer create_buffer(rlx_wg_context* c, const WGPUBufferDescriptor* d, rlx_error* err,
                                const char* what, rlx_status* out_status) {
  rlx_wg_scope_push(c);
  WGPUBuffer b = c->f.wgpuDeviceCreateBuffer(c->device, d);
  *out_status = rlx_wg_scope_pop(c, err, what);
  return b;
}

rlx_status rlx_wg_buffer(rlx_wg_context* c, uint64_t size, WGPUFlags usage, rlx_error* err,
                         const char* what, WGPUBuffer* out) {
  WGPUBufferDescriptor d;
  memset(&d, 0, sizeof d);
  d.label = sv(what);
  d.usage = usage;
  d.size = (size + 15) & ~(uint64_t)15;
  rlx_status s;
  *out = create_buffer(c, &d, err, what, &s);
  if (s == RLX_RESOURCE_EXHAUSTED) {
    /* Out of memory may only mean that released executables' buffers are
     * not reclaimed yet (on the H200 a fresh 2 GiB arena failed right after
     * 69 others were destroyed): reclaim, then try once more. */
    if (*out) c->f.wgpuBufferRelease(*out);
    reclaim_destroyed_buffers(c);
    *out = create_buffer(c, &d, err, what, &s);
  }
  if (s == RLX_OK && !*out)
    s = rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "webgpu: cannot create %s (%llu bytes)", what,
                 (unsigned long long)size);
  if (s && *out) {
    c->f.wgpuBufferRelease(*out);
    *out = NULL;
  }
  return s;
}

static void on_map(uint32_t status, WGPUStringView msg, void* u1, void* u2) {
  (void)msg; (void)u2;
  *(uint32_t*)u1 = status;
}

rlx_status rlx_wg_map_read(rlx_wg_context* c, WGPUBuffer buf, void* dst, uint64_t bytes,
                           rlx_error* err) {
  if (bytes == 0) return RLX_OK;
  uint32_t status = 0;
  size_t n = (size_t)((bytes + 3) & ~(uint64_t)3);
  WGPUCallbackInfo cb = {NULL, WGPU_CALLBACK_MODE_WAIT_ANY_ONLY, (void*)on_map, &status, NULL};
  RLX_RETURN_IF_ERROR(rlx_wg_wait_gpu(c, c->f.wgpuBufferMapAsync(buf, WGPU_MAP_MODE_READ, 0, n, cb),
                                      err, "a readback map"));
  if (status != WGPU_REQUEST_STATUS_SUCCESS)
    return rlx_fail(err, RLX_INTERNAL, "webgpu: mapping a readback buffer failed (status %u)", status);
  const void* p = c->f.wgpuBufferGetConstMappedRange(buf, 0, n);
  if (p) memcpy(dst, p, (size_t)bytes);
  c->f.wgpuBufferUnmap(buf);
  return p ? RLX_OK : rlx_fail(err, RLX_INTERNAL, "webgpu: mapped range unavailable");
}

/* ------------------------------------------------------------ pipelines */

/* Arena views: 32-bit words, atomic words (sub-word stores), or vec4
 * words (fast paths: 16-byte loads and stores). */
enum { ARENA_WORDS, ARENA_ATOMIC, ARENA_VEC4 };

typedef struct kernel_source {
  const char* src;
  const char* entry;
  int vec4;            /* the fast paths see the arena as vec4 words */
  const char* defines; /* prepended constants (variants of one source) */
} kernel_source;

static kernel_source source_of(rlx_wg_kernel k) {
  static const kernel_source sources[RLX_WG_KERNEL_COUNT] = {
#define RLX_WG_KERNEL_SOURCE(e, src, entry, vec4, defines) \
  [RLX_WG_##e] = {rlx_wg_src_##src, entry, vec4, defines},
      RLX_WG_KERNELS(RLX_WG_KERNEL_SOURCE)
#undef RLX_WG_KERNEL_SOURCE
  };
  return (unsigned)k < RLX_WG_KERNEL_COUNT ? sources[k] : (kernel_source){NULL, NULL, 0, NULL};
}

/* Shared WGSL placed before a kernel's own source: the quantized block
 * decoders (quant.wgsl, their one WGSL copy) for DequantMatMul and
 * DequantGroupedMatMul. */
static const char* kernel_library(rlx_wg_kernel k) {
  switch (k) {
    case RLX_WG_DQ_GEMV: case RLX_WG_DQ_TILE: case RLX_WG_DQ_T: case RLX_WG_GQ_GEMV:
    case RLX_WG_GQ_TILE:
      return rlx_wg_src_quant;
    default: return "";
  }
}

/* The arena binding and its word accessors. Steps that store sub-word
 * elements (f16, bf16, i8, u8, bool) share words between invocations, so
 * they see the arena as atomic words and store with atomic and/or. */
static const char* arena_prelude(int mode) {
  if (mode == ARENA_ATOMIC)
    return "@group(0) @binding(0) var<storage, read_write> A: array<atomic<u32>>;\n"
           "fn lw(i: u32) -> u32 { return atomicLoad(&A[i]); }\n"
           "fn sw(i: u32, v: u32) { atomicStore(&A[i], v); }\n"
           "fn sw_part(i: u32, mask: u32, bits: u32) {\n"
           "  atomicAnd(&A[i], ~mask); atomicOr(&A[i], bits & mask);\n}\n";
  if (mode == ARENA_VEC4) /* words are components: only whole-word stores */
    return "@group(0) @binding(0) var<storage, read_write> A: array<vec4<u32>>;\n"
           "fn lw(i: u32) -> u32 { return A[i >> 2u][i & 3u]; }\n"
           "fn sw(i: u32, v: u32) { A[i >> 2u][i & 3u] = v; }\n"
           "fn sw_part(i: u32, mask: u32, bits: u32) { sw(i, (lw(i) & ~mask) | (bits & mask)); }\n"
           /* four elements from element index e (a multiple of 4) of view
            * `slot`: f32 at 16-byte, f16 / bf16 at 8-byte aligned offsets */
           "fn quad4(slot: u32, e: u32) -> vec4<f32> {\n"
           "  let dt = v_dt(slot);\n"
           "  if (dt == DT_F32) { return bitcast<vec4<f32>>(A[(v_off(slot) >> 4u) + (e >> 2u)]); }\n"
           "  let w = (v_off(slot) >> 2u) + (e >> 1u);\n"
           "  let q = A[w >> 2u];\n"
           "  let p = select(q.xy, q.zw, (w & 2u) != 0u);\n"
           "  if (dt == DT_BF16) {\n"
           "    return vec4<f32>(bitcast<f32>(p.x << 16u), bitcast<f32>(p.x & 0xffff0000u),\n"
           "                     bitcast<f32>(p.y << 16u), bitcast<f32>(p.y & 0xffff0000u));\n  }\n"
           "  return f16x4_to_f32(p);\n}\n";
  return "@group(0) @binding(0) var<storage, read_write> A: array<u32>;\n"
         "fn lw(i: u32) -> u32 { return A[i]; }\n"
         "fn sw(i: u32, v: u32) { A[i] = v; }\n"
         "fn sw_part(i: u32, mask: u32, bits: u32) { A[i] = (A[i] & ~mask) | (bits & mask); }\n";
}

/* Invocation ids (entry points take `ids: Ids` beside workgroup_id, which
 * stays a separate parameter: a struct holding any non-uniform member is
 * non-uniform as a whole for WGSL's uniformity analysis), the f16 load and the
 * workgroup reductions (n invocations, a power of two <= 256), in a subgroup form and a workgroup-memory
 * form. Both reduce in a fixed order for a given device. Max reduces
 * order-preserving u32 keys of floats (NaN above everything), so NaN rules
 * do not depend on the driver's subgroupMax. */
static const char* feature_prelude_sg =
    "struct Ids { @builtin(local_invocation_index) lid: u32,\n"
    "  @builtin(subgroup_invocation_id) sid: u32, @builtin(subgroup_size) ssz: u32 }\n"
    "var<workgroup> wr_f: array<f32, 256>;\n"
    "var<workgroup> wr_u: array<u32, 256>;\n"
    "fn wg_sum(x: f32, ids: Ids, n: u32) -> f32 {\n"
    "  let s = subgroupAdd(x);\n"
    "  workgroupBarrier();\n"
    "  if (ids.sid == 0u) { wr_f[ids.lid / ids.ssz] = s; }\n"
    "  workgroupBarrier();\n"
    "  var t = 0.0;\n"
    "  for (var i = 0u; i < (n + ids.ssz - 1u) / ids.ssz; i = i + 1u) { t = t + wr_f[i]; }\n"
    "  return t;\n}\n"
    "fn wg_max_key(k: u32, ids: Ids, n: u32) -> u32 {\n"
    "  let s = subgroupMax(k);\n"
    "  workgroupBarrier();\n"
    "  if (ids.sid == 0u) { wr_u[ids.lid / ids.ssz] = s; }\n"
    "  workgroupBarrier();\n"
    "  var t = 0u;\n"
    "  for (var i = 0u; i < (n + ids.ssz - 1u) / ids.ssz; i = i + 1u) { t = max(t, wr_u[i]); }\n"
    "  return t;\n}\n";

static const char* feature_prelude_wg =
    "struct Ids { @builtin(local_invocation_index) lid: u32 }\n"
    "var<workgroup> wr_f: array<f32, 256>;\n"
    "var<workgroup> wr_u: array<u32, 256>;\n"
    "fn wg_sum(x: f32, ids: Ids, n: u32) -> f32 {\n"
    "  workgroupBarrier();\n"
    "  wr_f[ids.lid] = x;\n"
    "  workgroupBarrier();\n"
    "  for (var s = n / 2u; s > 0u; s = s >> 1u) {\n"
    "    if (ids.lid < s) { wr_f[ids.lid] = wr_f[ids.lid] + wr_f[ids.lid + s]; }\n"
    "    workgroupBarrier();\n  }\n"
    "  return wr_f[0];\n}\n"
    "fn wg_max_key(k: u32, ids: Ids, n: u32) -> u32 {\n"
    "  workgroupBarrier();\n"
    "  wr_u[ids.lid] = k;\n"
    "  workgroupBarrier();\n"
    "  for (var s = n / 2u; s > 0u; s = s >> 1u) {\n"
    "    if (ids.lid < s) { wr_u[ids.lid] = max(wr_u[ids.lid], wr_u[ids.lid + s]); }\n"
    "    workgroupBarrier();\n  }\n"
    "  return wr_u[0];\n}\n";

/* f16 bits -> f32: exact either way; shader-f16 converts natively. */
static const char* f16_load_native =
    "fn f16_to_f32(h: u32) -> f32 { return f32(bitcast<vec2<f16>>(h & 0xffffu).x); }\n"
    "fn f16x4_to_f32(p: vec2<u32>) -> vec4<f32> { return vec4<f32>(bitcast<vec4<f16>>(p)); }\n";
static const char* f16_load_int =
    "fn f16_to_f32(h: u32) -> f32 { return f16_to_f32_int(h); }\n"
    "fn f16x4_to_f32(p: vec2<u32>) -> vec4<f32> {\n"
    "  return vec4<f32>(f16_to_f32_int(p.x), f16_to_f32_int(p.x >> 16u), f16_to_f32_int(p.y),\n"
    "                   f16_to_f32_int(p.y >> 16u));\n}\n";

rlx_status rlx_wg_pipeline(rlx_wg_context* c, rlx_wg_kernel k, int atomic, rlx_error* err,
                           WGPUComputePipeline* out) {
  atomic = atomic ? 1 : 0;
  if (c->pipes[k][atomic]) {
    *out = c->pipes[k][atomic];
    return RLX_OK;
  }
  kernel_source ks = source_of(k);
  if (!ks.src) return rlx_fail(err, RLX_INTERNAL, "webgpu: no kernel %d", (int)k);
  rlx_buf t = {0}; /* the module's source */
  /* enable directives come before every declaration */
  if (c->use_f16) rlx_buf_puts(&t, "enable f16;\n");
  /* Reductions run in workgroup-uniform control flow (the row index comes
   * from the record, which the analysis cannot prove uniform). */
  if (c->use_subgroups) rlx_buf_puts(&t, "enable subgroups;\ndiagnostic(off, subgroup_uniformity);\n");
  rlx_buf_puts(&t, arena_prelude(ks.vec4 ? ARENA_VEC4 : atomic ? ARENA_ATOMIC : ARENA_WORDS));
  rlx_buf_puts(&t, c->use_subgroups ? feature_prelude_sg : feature_prelude_wg);
  rlx_buf_puts(&t, c->use_f16 ? f16_load_native : f16_load_int);
  rlx_buf_puts(&t, ks.defines);
  rlx_buf_puts(&t, rlx_wg_src_constants); /* generated: record layout + op codes */
  rlx_buf_puts(&t, rlx_wg_src_common);
  rlx_buf_puts(&t, kernel_library(k));
  rlx_buf_puts(&t, ks.src);
  if (t.oom) { rlx_buf_free(&t); return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory"); }
  WGPUShaderSourceWGSL wgsl = {{NULL, WGPU_STYPE_SHADER_SOURCE_WGSL}, {t.p, t.n}};
  WGPUShaderModuleDescriptor md;
  memset(&md, 0, sizeof md);
  md.nextInChain = &wgsl.chain;
  md.label = sv(ks.entry);
  char what[96];
  snprintf(what, sizeof what, "compiling WGSL kernel %d (%s%s)", (int)k, ks.entry,
           atomic ? ", atomic arena" : "");
  rlx_wg_scope_push(c);
  WGPUShaderModule mod = c->f.wgpuDeviceCreateShaderModule(c->device, &md);
  WGPUComputePipelineDescriptor pd;
  memset(&pd, 0, sizeof pd);
  pd.layout = c->layout;
  pd.compute.module = mod;
  pd.compute.entryPoint = sv(ks.entry);
  WGPUComputePipeline p = mod ? c->f.wgpuDeviceCreateComputePipeline(c->device, &pd) : NULL;
  rlx_status s = rlx_wg_scope_pop(c, err, what);
  if (mod) c->f.wgpuShaderModuleRelease(mod);
  if (s == RLX_OK && rlx_env_flag(RLX_ENV_WG_DUMP)) fputs(t.p, stderr);
  rlx_buf_free(&t);
  if (s == RLX_OK && !p) s = rlx_fail(err, RLX_INTERNAL, "webgpu: %s failed", what);
  if (s) {
    if (p) c->f.wgpuComputePipelineRelease(p);
    return s;
  }
  c->pipes[k][atomic] = p;
  *out = p;
  return RLX_OK;
}

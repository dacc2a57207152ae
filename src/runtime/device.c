/* Device registry: which backends this build has, and whether each can start.
 * The only global state in the library; probing is done once, under a lock. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "runtime/backend.h"
#ifdef RLX_HAVE_VULKAN
#include "backends/vulkan/vk_backend.h"
#endif
#ifdef RLX_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif
#ifdef RLX_HAVE_WEBGPU
#include "backends/webgpu/wg_backend.h"
#endif

typedef struct device_slot {
  const char* name;
  const rlx_backend* backend; /* NULL: not built into this library */
  int available;
  char detail[256];
  int software; /* emulated device (lavapipe): usable, but not "best" */
  int probed;
} device_slot;

/* Order of preference for "best". GPU backends join as their issues land. */
static device_slot g_devices[] = {
#ifdef RLX_HAVE_CUDA
    {"cuda", &rlx_backend_cuda, 0, "", 0, 0},
#else
    {"cuda", NULL, 0, "", 0, 0},
#endif
#ifdef RLX_HAVE_VULKAN
    {"vulkan", &rlx_backend_vulkan, 0, "", 0, 0},
#else
    {"vulkan", NULL, 0, "", 0, 0},
#endif
#ifdef RLX_HAVE_WEBGPU
    {"webgpu", &rlx_backend_webgpu, 0, "", 0, 0},
#else
    {"webgpu", NULL, 0, "", 0, 0},
#endif
    {"cpu", &rlx_backend_cpu, 0, "", 0, 0},
};
enum { N_DEVICES = sizeof g_devices / sizeof g_devices[0] };
/* Each device is probed once, on first need (starting a driver can take
 * long: a plain CPU compile never touches the GPU drivers). */
static pthread_mutex_t g_probe_lock = PTHREAD_MUTEX_INITIALIZER;

static device_slot* probed(int i) {
  device_slot* d = &g_devices[i];
  pthread_mutex_lock(&g_probe_lock);
  if (!d->probed) {
    if (!d->backend) {
      snprintf(d->detail, sizeof d->detail, "not built");
    } else {
      char reason[200] = "";
      int probe = d->backend->probe(reason, sizeof reason);
      d->available = probe != RLX_PROBE_UNAVAILABLE;
      d->software = probe == RLX_PROBE_SOFTWARE;
      snprintf(d->detail, sizeof d->detail, "%s%s%s", d->available ? "available" : "unavailable",
               reason[0] ? ": " : "", reason);
    }
    d->probed = 1;
  }
  pthread_mutex_unlock(&g_probe_lock);
  return d;
}

int32_t rlx_device_count(void) { return N_DEVICES; }

rlx_status rlx_device_get(int32_t index, rlx_device_info* out_info) {
  if (index < 0 || index >= N_DEVICES || !out_info) return RLX_INVALID_ARGUMENT;
  device_slot* d = probed(index);
  out_info->name = d->name;
  out_info->available = d->available;
  out_info->detail = d->detail;
  out_info->software = d->software;
  return RLX_OK;
}

rlx_status rlx_device_resolve(const char* name, const char** out_name) {
  if (!name || !out_name) return RLX_INVALID_ARGUMENT;
  int best = strcmp(name, "best") == 0;
  for (int i = 0; i < N_DEVICES; i++) {
    if (!best && strcmp(name, g_devices[i].name) != 0) continue;
    device_slot* d = probed(i);
    if (best ? d->available && !d->software : 1) {
      *out_name = d->name;
      if (!d->available) return d->backend ? RLX_UNAVAILABLE : RLX_UNIMPLEMENTED;
      return RLX_OK;
    }
  }
  return RLX_NOT_FOUND;
}

const rlx_backend* rlx_backend_find(const char* name) {
  for (int i = 0; i < N_DEVICES; i++)
    if (strcmp(name, g_devices[i].name) == 0) return g_devices[i].backend;
  return NULL;
}

rlx_status rlx_backend_lookup(const char* name, const rlx_backend** out_backend) {
  *out_backend = NULL;
  for (int i = 0; name && i < N_DEVICES; i++) {
    if (strcmp(name, g_devices[i].name) != 0) continue;
    *out_backend = g_devices[i].backend;
    return g_devices[i].backend ? RLX_OK : RLX_UNIMPLEMENTED;
  }
  return RLX_NOT_FOUND;
}

/* Detail string of a device by name (for compile errors). */
const char* rlx_device_detail(const char* name) {
  for (int i = 0; i < N_DEVICES; i++)
    if (strcmp(name, g_devices[i].name) == 0) return probed(i)->detail;
  return "unknown device";
}

/* Which backends time their runs is known here, where the backends are
 * linked in: CUDA (events) and Vulkan (timestamps, RLX_VK_TIMING=1). */
double rlx_device_last_run_ms(const rlx_backend* b) {
#ifdef RLX_HAVE_CUDA
  if (b == &rlx_backend_cuda) return rlx_cuda_last_run_ms();
#endif
#ifdef RLX_HAVE_VULKAN
  if (b == &rlx_backend_vulkan) return rlx_vk_last_run_ms(); /* RLX_VK_TIMING=1 */
#endif
  (void)b;
  return -2;
}

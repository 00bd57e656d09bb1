/* nvml_probe.c — the free memory of the GPU a CUDA leg would use, read
 * through NVML (libnvidia-ml, the driver's management library, the one
 * nvidia-smi reads) without creating a CUDA context.
 *
 * Why: `run` asks `train --dry-run-memory` whether its legs fit on the
 * device before any leg starts. Through the CUDA module that costs a CUDA
 * context, 0.45-0.55 s on the H200 host (bench/NOTES.md, session 10), all
 * of it on the run's critical path; NVML answers in ~0.02 s. The library
 * is opened with dlopen, like the module, so the program still links no
 * NVIDIA library; it ships with the driver, not the toolkit, and its
 * header is not installed everywhere the program is built, so the six
 * entry points used are declared here as nvml.h declares them (the _v2
 * names are NVML's stable ABI since driver 325).
 *
 * Only when the device is unambiguous: the one GPU of the host, or the one
 * CUDA_VISIBLE_DEVICES names first (by UUID, or by index when
 * CUDA_DEVICE_ORDER=PCI_BUS_ID makes CUDA's numbering NVML's). Anything
 * else (MIG instances, several GPUs in CUDA's default order, no driver)
 * says why and the caller asks CUDA itself. */
#include "backend/nvml_probe.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_return;                 /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_device *nvml_device; /* nvmlDevice_t, opaque */
typedef struct {
  unsigned long long total, free, used; /* nvmlMemory_t, bytes */
} nvml_memory;

typedef struct {
  nvml_return (*init)(void);
  nvml_return (*shutdown)(void);
  nvml_return (*count)(unsigned *);
  nvml_return (*by_index)(unsigned, nvml_device *);
  nvml_return (*by_uuid)(const char *, nvml_device *);
  nvml_return (*memory)(nvml_device, nvml_memory *);
} nvml_api;

static bool resolve(void *h, nvml_api *api) {
  api->init = (nvml_return(*)(void))dlsym(h, "nvmlInit_v2");
  api->shutdown = (nvml_return(*)(void))dlsym(h, "nvmlShutdown");
  api->count = (nvml_return(*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
  api->by_index =
      (nvml_return(*)(unsigned, nvml_device *))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
  api->by_uuid = (nvml_return(*)(const char *, nvml_device *))dlsym(h, "nvmlDeviceGetHandleByUUID");
  api->memory = (nvml_return(*)(nvml_device, nvml_memory *))dlsym(h, "nvmlDeviceGetMemoryInfo");
  return api->init && api->shutdown && api->count && api->by_index && api->by_uuid && api->memory;
}

/* The device CUDA's device 0 is, by NVML's numbering; false with why. */
static bool pick_device(const nvml_api *api, nvml_device *dev, char *why, size_t cap) {
  unsigned n = 0;
  if (api->count(&n) != 0 || n == 0) {
    snprintf(why, cap, "NVML sees no GPU");
    return false;
  }
  const char *visible = getenv("CUDA_VISIBLE_DEVICES");
  const char *order = getenv("CUDA_DEVICE_ORDER");
  bool pci_order = order && !strcmp(order, "PCI_BUS_ID");
  if (!visible) {
    if (n == 1 || pci_order) return api->by_index(0, dev) == 0;
    snprintf(why, cap, "%u GPUs in CUDA's default (fastest-first) order", n);
    return false;
  }
  char first[128];
  size_t len = strcspn(visible, ",");
  if (len == 0 || len >= sizeof first) {
    snprintf(why, cap, "CUDA_VISIBLE_DEVICES names no device NVML can look up");
    return false;
  }
  memcpy(first, visible, len);
  first[len] = 0;
  if (!strncmp(first, "GPU-", 4)) {
    if (api->by_uuid(first, dev) == 0) return true;
    snprintf(why, cap, "NVML knows no GPU %s (a UUID prefix?)", first);
    return false;
  }
  char *end;
  long index = strtol(first, &end, 10);
  if (*end || index < 0 || (unsigned long)index >= n || (n > 1 && !pci_order)) {
    snprintf(why, cap, "CUDA_VISIBLE_DEVICES=%s is not a device NVML can name", visible);
    return false;
  }
  return api->by_index((unsigned)index, dev) == 0;
}

int rc_nvml_device_free(uint64_t *free_bytes, char *why, size_t cap) {
  void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(why, cap, "no NVML (libnvidia-ml.so.1): %s", dlerror());
    return -1;
  }
  nvml_api api;
  int rc = -1;
  if (!resolve(h, &api)) {
    snprintf(why, cap, "libnvidia-ml.so.1 lacks an entry point this probe uses");
  } else if (api.init() != 0) {
    snprintf(why, cap, "nvmlInit failed");
  } else {
    nvml_device dev;
    nvml_memory mem;
    if (!pick_device(&api, &dev, why, cap)) {
      if (!why[0]) snprintf(why, cap, "NVML could not look the device up");
    } else if (api.memory(dev, &mem) != 0) {
      snprintf(why, cap, "nvmlDeviceGetMemoryInfo failed");
    } else {
      *free_bytes = mem.free;
      rc = 0;
    }
    api.shutdown();
  }
  dlclose(h);
  return rc;
}

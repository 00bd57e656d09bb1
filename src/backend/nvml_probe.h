/* nvml_probe.h — a GPU's free memory without a CUDA context (nvml_probe.c
 * says why and when it can answer). */
#ifndef RC_BACKEND_NVML_PROBE_H
#define RC_BACKEND_NVML_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The free bytes of the device a CUDA leg of this process would use (CUDA's
 * device 0), as NVML reports them: 0, or -1 with why set (no driver
 * library, no GPU, or a device it cannot name unambiguously). */
int rc_nvml_device_free(uint64_t *free_bytes, char *why, size_t cap);

#endif

/* Where computation runs: the CPU, or a CUDA GPU.
 *
 * bagpipe is built with the CUDA backend only when nvcc was found (cmake/cuda.cmake);
 * this layer answers, without any CUDA header in the caller, whether it was and
 * how many GPUs this process sees, so that `--device cuda` can stop with one clear
 * line before any work where no GPU can be used. */
#ifndef BP_CORE_DEVICE_H
#define BP_CORE_DEVICE_H

#include <stdbool.h>

#include "bagpipe/status.h"

/* check: the checking backend (core/backend.h), the cpu's kernels on memory the host
 * cannot touch outside the backend's calls; how tests show that the step reaches
 * device memory only through the backend table. */
/* emu: the emulated backend (core/backend_emu.h), a GPU of a data sheet whose kernels
 * compute nothing and take that GPU's time. */
typedef enum bp_device_kind {
    BP_DEVICE_CPU,
    BP_DEVICE_CUDA,
    BP_DEVICE_CHECK,
    BP_DEVICE_EMU
} bp_device_kind;

/* "cpu|cuda|check", in bp_device_kind order: the devices that compute values. */
#define BP_DEVICE_CHOICES "cpu|cuda|check"

const char *bp_device_name(bp_device_kind kind);

/* Whether this bagpipe was built with the CUDA backend. */
bool bp_device_cuda_built(void);

/* Number of CUDA GPUs this process sees (0 without the backend, without a driver or
 * without a GPU). *why (may be NULL) receives a short reason when it is 0. */
int bp_device_cuda_count(const char **why);

/* BP_OK when computation can run on `kind`; otherwise BP_EUSAGE with one line that
 * names `option` (e.g. "--device cuda") and says why not: built without CUDA, or
 * no GPU present. */
bp_status bp_device_require(bp_device_kind kind, const char *option, bp_err *err);

#endif

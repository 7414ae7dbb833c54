#include "core/device.h"

#include <stddef.h>

#ifdef BP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

const char *bp_device_name(bp_device_kind kind) {
    return kind == BP_DEVICE_CUDA    ? "cuda"
           : kind == BP_DEVICE_CHECK ? "check"
           : kind == BP_DEVICE_EMU   ? "emu"
                                     : "cpu";
}

bool bp_device_cuda_built(void) {
#ifdef BP_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

int bp_device_cuda_count(const char **why) {
    const char *reason = "not built with CUDA";
    int n = 0;
#ifdef BP_HAVE_CUDA
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        n = 0;
        /* cudaErrorNoDevice and cudaErrorInsufficientDriver are the usual ones on a
         * machine without a GPU; the runtime's own string names them. */
        reason = cudaGetErrorString(e);
        (void)cudaGetLastError(); /* clear the sticky error for later calls */
    } else if (n == 0) {
        reason = "no CUDA GPU is present";
    }
#endif
    if (why) *why = n > 0 ? NULL : reason;
    return n;
}

bp_status bp_device_require(bp_device_kind kind, const char *option, bp_err *err) {
    if (kind != BP_DEVICE_CUDA) return BP_OK;
    if (!bp_device_cuda_built())
        return bp_fail(err, BP_EUSAGE,
                       "%s: this bagpipe was built without CUDA (configure with nvcc installed, "
                       "or -DBP_CUDA=ON)",
                       option);
    const char *why;
    if (bp_device_cuda_count(&why) == 0)
        return bp_fail(err, BP_EUSAGE, "%s: no usable CUDA GPU on this machine (%s)", option, why);
    return BP_OK;
}

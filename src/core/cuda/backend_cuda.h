/* The cuda backend of the table (core/backend.h): memory on one GPU, the step's
 * vector operations and optimizer updates as kernels on the context's stream, streams
 * and events as cudaStream_t and cudaEvent_t. One instance per process, made over
 * that process's context; every operation reaches the context through be->ctx.
 *
 * Copies to and from the host wait for the stream, so a host buffer may be reused
 * once they return, as on the cpu; the other operations are asynchronous, and those
 * that return a value (all_finite, sumsq, zero_nonfinite) wait for it. A failed
 * launch or copy is kept as the context's first error (bp_cuda_sync reports it). */
#ifndef BP_CORE_CUDA_BACKEND_H
#define BP_CORE_CUDA_BACKEND_H

#include "core/backend.h"
#include "core/cuda/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A backend over cu, which must outlive it. */
bp_status bp_backend_cuda_create(bp_cuda *cu, bp_backend **out, bp_err *err);
/* A backend over a context of its own on GPU `gpu` (bp_cuda_create's tf32), which
 * bp_backend_cuda_destroy destroys with it. */
bp_status bp_backend_cuda_open(int gpu, bool tf32, bp_backend **out, bp_err *err);
void bp_backend_cuda_destroy(bp_backend *be);
/* The context of a cuda backend. */
bp_cuda *bp_backend_cuda_context(const bp_backend *be);

#ifdef __cplusplus
}
#endif
#endif

/* The backend table's vector operations and optimizer updates as CUDA kernels
 * (core/backend.h gives each rule; backend_cuda.c calls these). Launches are
 * asynchronous on the context's stream; pointers are device pointers. The update
 * constants are computed on the host in double exactly as the cpu backend does, so
 * both apply the same fp32 formula to every element. */
#ifndef BP_CORE_CUDA_VECTOR_H
#define BP_CORE_CUDA_VECTOR_H

#include "core/backend.h"
#include "core/cuda/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Partial sums for bp_cu_sumsq: at most this many blocks, one double each. */
#define BP_CU_SUMSQ_PARTS 1024

/* *out (a device double) = sum of x[i]^2 in double. Deterministic: a fixed grid
 * writes one partial per block into parts [BP_CU_SUMSQ_PARTS] (device), which one
 * block then adds in a fixed order; the same input gives the same bits every run. */
void bp_cu_sumsq(bp_cuda *c, double *out, double *parts, const float *x, size_t n);
/* *flag (a device int, not cleared) is set to 1 when some x[i] is not finite; with
 * zero, such elements are replaced by 0. */
void bp_cu_nonfinite(bp_cuda *c, int *flag, float *x, size_t n, bool zero);
void bp_cu_scale(bp_cuda *c, float *x, size_t n, float a);
void bp_cu_axpy(bp_cuda *c, float *y, size_t n, float a, const float *x);
void bp_cu_fill(bp_cuda *c, float *x, size_t n, float v);
void bp_cu_elastic_pull(bp_cuda *c, float *w, const float *center, float *diff, size_t n,
                        float alpha, bool accumulate);
/* DiLoCo's outer step with the cpu backend's rule (core/backend.h). */
void bp_cu_outer_step(bp_cuda *c, float *g, float *m, const float *d, float *w, size_t n, float lr,
                      float mu, float mix);
/* The optimizer update of elements [off, off + len) with the cpu backend's rules. */
void bp_cu_update(bp_cuda *c, const bp_update_args *a, float *p, const float *g, float *m, float *v,
                  size_t off, size_t len);

#ifdef __cplusplus
}
#endif
#endif

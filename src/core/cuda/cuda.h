/* The GPU context every CUDA part of bagpipe shares: device, stream, cuBLAS handle and
 * the first error; device memory and copies; element types. Built only with the CUDA
 * backend (cmake/cuda.cmake); only the cuda/ folder of each layer includes it.
 *
 * Launches are asynchronous on the context's stream and return nothing; a failed
 * launch, copy or cuBLAS call is kept as the context's first error, which bp_cuda_sync
 * (and every function that returns a status) reports with its context. */
#ifndef BP_CORE_CUDA_H
#define BP_CORE_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bagpipe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bp_cuda_dtype { BP_CUDA_F32, BP_CUDA_BF16 } bp_cuda_dtype;

/* Bytes of one element of dt. */
size_t bp_cuda_dtype_size(bp_cuda_dtype dt);

typedef struct bp_cuda bp_cuda;

/* A context on GPU `device`. tf32: matrix products of fp32 data on tensor cores with
 * TF32 inputs (PyTorch's allow_tf32); false keeps them exact fp32, as the tests want. */
bp_status bp_cuda_create(int device, bool tf32, bp_cuda **out, bp_err *err);
void bp_cuda_destroy(bp_cuda *c);
int bp_cuda_device(const bp_cuda *c);
/* The cudaStream_t of the context. */
void *bp_cuda_stream(bp_cuda *c);
/* Waits for the stream; BP_EINTERNAL naming `what` and the first error when a launch,
 * a copy or cuBLAS failed since the context was made. */
bp_status bp_cuda_sync(bp_cuda *c, const char *what, bp_err *err);
/* Records a failure (a CUDA or cuBLAS status that is not success) as the context's
 * first error; returns whether there was one. For the .cu and .c files of the backend. */
bool bp_cuda_failed(bp_cuda *c, int cuda_status, const char *what);
bool bp_cuda_blas_failed(bp_cuda *c, int cublas_status, const char *what);

/* Device memory, zeroed; BP_ENOMEM naming `what` and the size. */
bp_status bp_cuda_alloc(bp_cuda *c, void **p, size_t bytes, const char *what, bp_err *err);
void bp_cuda_free(void *p);
/* Pinned host memory (for staging); BP_ENOMEM naming `what`. */
bp_status bp_cuda_alloc_host(void **p, size_t bytes, const char *what, bp_err *err);
void bp_cuda_free_host(void *p);
/* Synchronous copies on the context's stream (host memory need not be pinned). */
bp_status bp_cuda_upload(bp_cuda *c, void *dst, const void *src, size_t bytes, bp_err *err);
bp_status bp_cuda_download(bp_cuda *c, void *dst, const void *src, size_t bytes, bp_err *err);
void bp_cuda_memset0(bp_cuda *c, void *p, size_t bytes);
/* Device to device, asynchronous on the stream. */
void bp_cuda_copy(bp_cuda *c, void *dst, const void *src, size_t bytes);

/* dst [n] of type dt <- src [n] fp32 (round to nearest even for bf16), and back. */
void bp_cu_convert_to(bp_cuda *c, bp_cuda_dtype dt, void *dst, const float *src, size_t n);
void bp_cu_convert_from(bp_cuda *c, bp_cuda_dtype dt, float *dst, const void *src, size_t n);

#ifdef __cplusplus
}
#endif
#endif

/* The context of nn/cuda: device, stream, cuBLAS handle and the first error. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda/common.cuh"

size_t bp_cuda_dtype_size(bp_cuda_dtype dt) { return dt == BP_CUDA_BF16 ? 2 : 4; }

bool bp_cuda_failed(bp_cuda *c, int status, const char *what) {
    if (status == (int)cudaSuccess) return false;
    if (!c->failed)
        snprintf(c->first, sizeof c->first, "%s: %s", what,
                 cudaGetErrorString((cudaError_t)status));
    c->failed = true;
    return true;
}

bool bp_cuda_blas_failed(bp_cuda *c, int status, const char *what) {
    if (status == (int)CUBLAS_STATUS_SUCCESS) return false;
    if (!c->failed)
        snprintf(c->first, sizeof c->first, "%s: cuBLAS %s", what,
                 c->cublas.status_string((cublasStatus_t)status));
    c->failed = true;
    return true;
}

#define BP_STR2(x) #x
#define BP_STR(x) BP_STR2(x)

template <typename F> static bool find(void *lib, const char *name, F *out) {
    *out = reinterpret_cast<F>(dlsym(lib, name));
    return *out != nullptr;
}

/* cuBLAS of the toolkit bagpipe was built with: by its soname where the loader finds
 * it, else in the toolkit's folder. */
static bp_status cublas_open(bp_cublas *b, bp_err *err) {
    const char *names[] = {"libcublas.so." BP_STR(CUBLAS_VER_MAJOR),
                           BP_CUBLAS_DIR "/libcublas.so." BP_STR(CUBLAS_VER_MAJOR)};
    for (int i = 0; i < 2 && !b->lib; i++) b->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!b->lib)
        return bp_fail(err, BP_EUSAGE, "cuda: cannot open cuBLAS (%s): %s", names[0], dlerror());
    const char *missing = !find(b->lib, "cublasCreate_v2", &b->create)           ? "cublasCreate"
                          : !find(b->lib, "cublasDestroy_v2", &b->destroy)       ? "cublasDestroy"
                          : !find(b->lib, "cublasSetStream_v2", &b->set_stream)  ? "cublasSetStream"
                          : !find(b->lib, "cublasGetStatusString", &b->status_string)
                              ? "cublasGetStatusString"
                          : !find(b->lib, "cublasGemmEx", &b->gemm) ? "cublasGemmEx"
                          : !find(b->lib, "cublasGemmStridedBatchedEx", &b->gemm_batched)
                              ? "cublasGemmStridedBatchedEx"
                              : NULL;
    if (!missing) return BP_OK;
    dlclose(b->lib);
    b->lib = NULL;
    return bp_fail(err, BP_EUSAGE, "cuda: %s has no %s", names[0], missing);
}

bp_status bp_cuda_create(int device, bool tf32, bp_cuda **out, bp_err *err) {
    *out = NULL;
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return bp_fail(err, BP_EUSAGE, "cuda: cannot use GPU %d: %s", device, cudaGetErrorString(e));
    bp_cuda *c = (bp_cuda *)calloc(1, sizeof *c);
    if (!c) return bp_fail(err, BP_ENOMEM, "cuda: cannot allocate the context");
    c->device = device;
    c->tf32 = tf32;
    bp_status rc = cublas_open(&c->cublas, err);
    if (rc) {
        free(c);
        return rc;
    }
    cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, device);
    if ((e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        dlclose(c->cublas.lib);
        free(c);
        return bp_fail(err, BP_EINTERNAL, "cuda: cannot create a stream on GPU %d: %s", device,
                       cudaGetErrorString(e));
    }
    cublasStatus_t s = c->cublas.create(&c->blas);
    if (s == CUBLAS_STATUS_SUCCESS) s = c->cublas.set_stream(c->blas, c->stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
        bp_fail(err, BP_EINTERNAL, "cuda: cannot create a cuBLAS handle on GPU %d: %s", device,
                c->cublas.status_string(s));
        if (c->blas) c->cublas.destroy(c->blas);
        cudaStreamDestroy(c->stream);
        dlclose(c->cublas.lib);
        free(c);
        return BP_EINTERNAL;
    }
    *out = c;
    return BP_OK;
}

void bp_cuda_destroy(bp_cuda *c) {
    if (!c) return;
    cudaStreamSynchronize(c->stream);
    c->cublas.destroy(c->blas);
    dlclose(c->cublas.lib);
    cudaStreamDestroy(c->stream);
    free(c);
}

int bp_cuda_device(const bp_cuda *c) { return c->device; }
void *bp_cuda_stream(bp_cuda *c) { return (void *)c->stream; }

bp_status bp_cuda_sync(bp_cuda *c, const char *what, bp_err *err) {
    bp_cuda_failed(c, (int)cudaStreamSynchronize(c->stream), "stream");
    if (!c->failed) return BP_OK;
    return bp_fail(err, BP_EINTERNAL, "%s on GPU %d: %s", what, c->device, c->first);
}

bp_status bp_cuda_alloc(bp_cuda *c, void **p, size_t bytes, const char *what, bp_err *err) {
    *p = NULL;
    if (bytes == 0) return BP_OK;
    cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError();
        return bp_fail(err, BP_ENOMEM, "cuda: cannot allocate %zu bytes for %s on GPU %d: %s",
                       bytes, what, c->device, cudaGetErrorString(e));
    }
    bp_cuda_failed(c, (int)cudaMemsetAsync(*p, 0, bytes, c->stream), what);
    return BP_OK;
}

void bp_cuda_free(void *p) {
    if (p) cudaFree(p);
}

bp_status bp_cuda_alloc_host(void **p, size_t bytes, const char *what, bp_err *err) {
    *p = NULL;
    if (bytes == 0) return BP_OK;
    cudaError_t e = cudaMallocHost(p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        (void)cudaGetLastError();
        return bp_fail(err, BP_ENOMEM, "cuda: cannot allocate %zu pinned bytes for %s: %s", bytes,
                       what, cudaGetErrorString(e));
    }
    return BP_OK;
}

void bp_cuda_free_host(void *p) {
    if (p) cudaFreeHost(p);
}

static bp_status copy(bp_cuda *c, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                      const char *what, bp_err *err) {
    if (bytes == 0) return BP_OK;
    bp_cuda_failed(c, (int)cudaMemcpyAsync(dst, src, bytes, kind, c->stream), what);
    return bp_cuda_sync(c, what, err);
}

bp_status bp_cuda_upload(bp_cuda *c, void *dst, const void *src, size_t bytes, bp_err *err) {
    return copy(c, dst, src, bytes, cudaMemcpyHostToDevice, "upload", err);
}

bp_status bp_cuda_download(bp_cuda *c, void *dst, const void *src, size_t bytes, bp_err *err) {
    return copy(c, dst, src, bytes, cudaMemcpyDeviceToHost, "download", err);
}

void bp_cuda_memset0(bp_cuda *c, void *p, size_t bytes) {
    if (bytes) bp_cuda_failed(c, (int)cudaMemsetAsync(p, 0, bytes, c->stream), "memset");
}

void bp_cuda_copy(bp_cuda *c, void *dst, const void *src, size_t bytes) {
    if (bytes)
        bp_cuda_failed(c, (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream),
                       "copy");
}

template <typename T> __global__ void convert_to_kernel(T *dst, const float *src, size_t n) {
    BP_FOR_N(i, n) dst[i] = st<T>(src[i]);
}
template <typename T> __global__ void convert_from_kernel(float *dst, const T *src, size_t n) {
    BP_FOR_N(i, n) dst[i] = ld(src[i]);
}

template <typename T> static void convert_to(bp_cuda *c, void *dst, const float *src, size_t n) {
    convert_to_kernel<T><<<bp_blocks(n, 256), 256, 0, c->stream>>>((T *)dst, src, n);
}
template <typename T> static void convert_from(bp_cuda *c, float *dst, const void *src, size_t n) {
    convert_from_kernel<T><<<bp_blocks(n, 256), 256, 0, c->stream>>>(dst, (const T *)src, n);
}

void bp_cu_convert_to(bp_cuda *c, bp_cuda_dtype dt, void *dst, const float *src, size_t n) {
    if (n == 0) return;
    BP_DISPATCH(dt, convert_to, c, dst, src, n);
    BP_LAUNCHED(c, "convert");
}

void bp_cu_convert_from(bp_cuda *c, bp_cuda_dtype dt, float *dst, const void *src, size_t n) {
    if (n == 0) return;
    BP_DISPATCH(dt, convert_from, c, dst, src, n);
    BP_LAUNCHED(c, "convert");
}

/* What the kernels of nn/cuda share: the context's inside, element types, warp
 * reductions and launch helpers. C++ (nvcc) only. */
#ifndef BP_NN_CUDA_COMMON_CUH
#define BP_NN_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/cuda/cuda.h"

/* The cuBLAS entry points bagpipe calls, found when a context is made (context.cu):
 * the library is opened then, not when bagpipe starts, since loading it costs every
 * command (the CPU's included) half a second and 200 MB. */
typedef struct bp_cublas {
    void *lib;
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    const char *(*status_string)(cublasStatus_t);
    cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                           const void *, const void *, cudaDataType, int, const void *,
                           cudaDataType, int, const void *, void *, cudaDataType, int,
                           cublasComputeType_t, cublasGemmAlgo_t);
    cublasStatus_t (*gemm_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                   int, const void *, const void *, cudaDataType, int, long long,
                                   const void *, cudaDataType, int, long long, const void *,
                                   void *, cudaDataType, int, long long, int, cublasComputeType_t,
                                   cublasGemmAlgo_t);
} bp_cublas;

struct bp_cuda {
    int device;
    bool tf32;
    cudaStream_t stream;
    bp_cublas cublas; /* the library's entry points */
    cublasHandle_t blas;
    int sms;            /* streaming multiprocessors, for grid sizes */
    bool failed;        /* the first error is kept in `first` */
    char first[BP_ERR_MSG_MAX];
};

typedef __nv_bfloat16 bf16;

/* Element access with fp32 arithmetic whatever the storage type. */
__device__ __forceinline__ float ld(float x) { return x; }
__device__ __forceinline__ float ld(bf16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T st(float x);
template <> __device__ __forceinline__ float st<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 st<bf16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* A reduction over a block of up to 1024 threads (warp_sum or warp_max, with its
 * identity); every thread gets the result. `shared` holds 32 floats. */
template <float (*warp_op)(float)>
__device__ __forceinline__ float block_reduce(float v, float identity, float *shared) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = (blockDim.x + 31) / 32;
    v = warp_op(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    return warp_op(lane < nwarps ? shared[lane] : identity);
}
__device__ __forceinline__ float block_sum(float v, float *shared) {
    return block_reduce<warp_sum>(v, 0.0f, shared);
}
__device__ __forceinline__ float block_max(float v, float *shared) {
    return block_reduce<warp_max>(v, -INFINITY, shared);
}

static inline unsigned bp_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 65535u * 32u ? b : 65535u * 32u);
}

/* A grid-stride loop over [0, n). */
#define BP_FOR_N(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

/* Records a failed launch (checked right after it) in the context. */
#define BP_LAUNCHED(c, what) bp_cuda_failed((c), (int)cudaGetLastError(), (what))

/* Calls f<float>(...) or f<bf16>(...) by dt. */
#define BP_DISPATCH(dt, F, ...)              \
    do {                                     \
        if ((dt) == BP_CUDA_BF16)            \
            F<bf16>(__VA_ARGS__);            \
        else                                 \
            F<float>(__VA_ARGS__);           \
    } while (0)

static inline cudaDataType_t bp_cuda_type(bp_cuda_dtype dt) {
    return dt == BP_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* The cuBLAS compute type for products of dt: exact fp32, TF32 tensor cores when the
 * context allows them, fp32 accumulation of bf16 products. */
static inline cublasComputeType_t bp_cuda_compute(const bp_cuda *c, bp_cuda_dtype dt) {
    if (dt == BP_CUDA_BF16) return CUBLAS_COMPUTE_32F;
    return c->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

#endif

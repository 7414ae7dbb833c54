/* Fully connected layer (nn/linear.c) through cuBLAS.
 *
 *   x [N, IC], W [OC, IC], b [OC] or NULL -> y [N, OC] = x W^T + b
 *   backward: dx [N, IC] = dy W;  dW [OC, IC] += dy^T x;  db [OC] += sum_n dy
 *
 * cuBLAS is column-major: a row-major [R, K] matrix is its column-major [K, R]
 * transpose, so y^T = W x^T is gemm(T, N) of W (ld IC) and x (ld IC), and so on
 * below. Activations are of type dt; dW and db are fp32 (cuBLAS accumulates bf16
 * products in fp32 and adds them to an fp32 C). */
#include "core/cuda/common.cuh"
#include "nn/cuda/layers_cuda.h"

static void gemm(bp_cuda *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                 float alpha, const void *a, cudaDataType_t at, int lda, const void *b,
                 cudaDataType_t bt, int ldb, float beta, void *out, cudaDataType_t ot, int ldc,
                 cublasComputeType_t compute, const char *what) {
    cublasStatus_t s = c->cublas.gemm(c->blas, ta, tb, m, n, k, &alpha, a, at, lda, b, bt, ldb,
                                    &beta, out, ot, ldc, compute, CUBLAS_GEMM_DEFAULT);
    bp_cuda_blas_failed(c, (int)s, what);
}

/* y [N, OC] <- b broadcast over the rows */
template <typename T> __global__ void bias_fill_kernel(T *y, const T *b, size_t N, int OC) {
    BP_FOR_N(i, N * OC) y[i] = b[i % OC];
}

/* db [OC] += sum over the N rows of dy [N, OC]: a 32 x 8 block sums 32 columns over a
 * slice of the rows, then adds its partial sums atomically. */
template <typename T> __global__ void bias_grad_kernel(float *db, const T *dy, int N, int OC) {
    __shared__ float part[8][33];
    int col = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (col < OC)
        for (int r = blockIdx.y * 8 + threadIdx.y; r < N; r += gridDim.y * 8)
            s += ld(dy[(size_t)r * OC + col]);
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < OC) {
        for (int k = 1; k < 8; k++) s += part[k][threadIdx.x];
        atomicAdd(&db[col], s);
    }
}

template <typename T> static void bias_fill(bp_cuda *c, void *y, const void *b, int N, int OC) {
    size_t n = (size_t)N * OC;
    bias_fill_kernel<T><<<bp_blocks(n, 256), 256, 0, c->stream>>>((T *)y, (const T *)b, (size_t)N,
                                                                   OC);
}

template <typename T> static void bias_grad(bp_cuda *c, float *db, const void *dy, int N, int OC) {
    int rows = (N + 255) / 256;
    dim3 grid((unsigned)((OC + 31) / 32), (unsigned)(rows < 256 ? rows : 256));
    bias_grad_kernel<T><<<grid, dim3(32, 8), 0, c->stream>>>(db, (const T *)dy, N, OC);
}

void bp_cu_linear_forward(bp_cuda *c, bp_cuda_dtype dt, void *y, const void *x, const void *w,
                          const void *b, int N, int IC, int OC) {
    float beta = 0.0f;
    if (b) {
        BP_DISPATCH(dt, bias_fill, c, y, b, N, OC);
        BP_LAUNCHED(c, "linear bias");
        beta = 1.0f;
    }
    cudaDataType_t t = bp_cuda_type(dt);
    gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, IC, 1.0f, w, t, IC, x, t, IC, beta, y, t, OC,
         bp_cuda_compute(c, dt), "linear forward");
}

void bp_cu_linear_backward(bp_cuda *c, bp_cuda_dtype dt, void *dx, float *dw, float *db,
                           const void *dy, const void *x, const void *w, int N, int IC, int OC) {
    cudaDataType_t t = bp_cuda_type(dt);
    cublasComputeType_t compute = bp_cuda_compute(c, dt);
    if (dx)
        gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, IC, N, OC, 1.0f, w, t, IC, dy, t, OC, 0.0f, dx, t, IC,
             compute, "linear backward dx");
    gemm(c, CUBLAS_OP_N, CUBLAS_OP_T, IC, OC, N, 1.0f, x, t, IC, dy, t, OC, 1.0f, dw, CUDA_R_32F,
         IC, compute, "linear backward dW");
    if (db) {
        BP_DISPATCH(dt, bias_grad, c, db, dy, N, OC);
        BP_LAUNCHED(c, "linear bias backward");
    }
}

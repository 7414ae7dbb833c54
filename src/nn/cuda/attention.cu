/* Causal multi-head self-attention (nn/attention.c).
 *
 *   qkv [B, T, 3C]     q, k, v side by side; head h uses channels [h*hs, (h+1)*hs) of
 *                      each, hs = C / NH
 *   att [B, NH, T, T]  softmax probabilities, saved; zero above the diagonal
 *   out [B, T, C]      heads side by side
 *
 * As on the CPU, the products run on strided views of qkv, with no transposed copies:
 * per batch row b, one strided-batched cuBLAS product over the NH heads (head h's q
 * starts hs elements after head h-1's). The scale 1/sqrt(hs) is the product's alpha,
 * and the causal mask is fused into the softmax kernel, which reads only the scores
 * at or below the diagonal and writes the zeros above it (so cuBLAS's upper half,
 * computed in the same product, is never read).
 *
 * Backward, per (b, h), with ds the gradient of the scores:
 *   datt = dy v^T,  dv = att^T dy,  ds = att * (datt - rowsum(att * datt)) * scale,
 *   dq = ds k,  dk = ds^T q */
#include "core/cuda/common.cuh"
#include "nn/cuda/layers_cuda.h"

/* One strided-batched product over the NH heads of one batch row; see linear.cu for
 * reading row-major matrices as column-major ones. */
static void heads_gemm(bp_cuda *c, bp_cuda_dtype dt, cublasOperation_t ta, cublasOperation_t tb,
                       int m, int n, int k, float alpha, const void *a, int lda, long long sa,
                       const void *b, int ldb, long long sb, void *out, int ldc, long long so,
                       int NH, const char *what) {
    float beta = 0.0f;
    cudaDataType_t t = bp_cuda_type(dt);
    cublasStatus_t s = c->cublas.gemm_batched(c->blas, ta, tb, m, n, k, &alpha, a, t, lda, sa,
                                                  b, t, ldb, sb, &beta, out, t, ldc, so, NH,
                                                  bp_cuda_compute(c, dt), CUBLAS_GEMM_DEFAULT);
    bp_cuda_blas_failed(c, (int)s, what);
}

/* Row r of rows [T] of a [T, T] matrix: softmax over columns 0..t (t = r % T), zeros
 * after; one warp per row. */
template <typename T> __global__ void causal_softmax_kernel(T *a, size_t rows, int T_) {
    size_t r = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    int t = (int)(r % T_);
    T *row = a + r * T_;
    float mx = -INFINITY;
    for (int j = lane; j <= t; j += 32) mx = fmaxf(mx, ld(row[j]));
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int j = lane; j <= t; j += 32) sum += expf(ld(row[j]) - mx);
    float inv = 1.0f / warp_sum(sum);
    for (int j = lane; j < T_; j += 32) row[j] = st<T>(j <= t ? expf(ld(row[j]) - mx) * inv : 0.0f);
}

/* g [rows, T] <- att * (g - sum_j att_j g_j) * scale in place, zero above the diagonal. */
template <typename T>
__global__ void causal_softmax_backward_kernel(T *g, const T *a, size_t rows, int T_, float scale) {
    size_t r = blockIdx.x * (size_t)(blockDim.x / 32) + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    int t = (int)(r % T_);
    T *gr = g + r * T_;
    const T *ar = a + r * T_;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32) dot += ld(ar[j]) * ld(gr[j]);
    dot = warp_sum(dot);
    for (int j = lane; j < T_; j += 32)
        gr[j] = st<T>(j <= t ? ld(ar[j]) * (ld(gr[j]) - dot) * scale : 0.0f);
}

template <typename T> static void softmax(bp_cuda *c, void *a, size_t rows, int T_) {
    unsigned blocks = (unsigned)((rows + 7) / 8);
    causal_softmax_kernel<T><<<blocks, 256, 0, c->stream>>>((T *)a, rows, T_);
}

template <typename T>
static void softmax_backward(bp_cuda *c, void *g, const void *a, size_t rows, int T_, float scale) {
    unsigned blocks = (unsigned)((rows + 7) / 8);
    causal_softmax_backward_kernel<T><<<blocks, 256, 0, c->stream>>>((T *)g, (const T *)a, rows,
                                                                      T_, scale);
}

void bp_cu_attention_forward(bp_cuda *c, bp_cuda_dtype dt, void *out, void *att, const void *qkv,
                             int B, int T, int C, int NH) {
    int hs = C / NH, C3 = 3 * C;
    size_t es = bp_cuda_dtype_size(dt), TT = (size_t)T * T;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) {
        const char *q = (const char *)qkv + (size_t)b * T * C3 * es;
        const char *k = q + (size_t)C * es;
        char *a = (char *)att + (size_t)b * NH * TT * es;
        /* scores^T [Ts, Tt] = k q^T per head: row-major scores [t, s] */
        heads_gemm(c, dt, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, scale, k, C3, hs, q, C3, hs, a, T,
                   (long long)TT, NH, "attention scores");
    }
    BP_DISPATCH(dt, softmax, c, att, (size_t)B * NH * T, T);
    BP_LAUNCHED(c, "attention softmax");
    for (int b = 0; b < B; b++) {
        const char *v = (const char *)qkv + ((size_t)b * T * C3 + 2 * (size_t)C) * es;
        const char *a = (const char *)att + (size_t)b * NH * TT * es;
        char *o = (char *)out + (size_t)b * T * C * es;
        /* out_h^T [hs, T] = v^T att^T */
        heads_gemm(c, dt, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, v, C3, hs, a, T, (long long)TT,
                   o, C, hs, NH, "attention output");
    }
}

void bp_cu_attention_backward(bp_cuda *c, bp_cuda_dtype dt, void *dqkv, void *datt,
                              const void *dout, const void *qkv, const void *att, int B, int T,
                              int C, int NH) {
    int hs = C / NH, C3 = 3 * C;
    size_t es = bp_cuda_dtype_size(dt), TT = (size_t)T * T;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) {
        size_t base = (size_t)b * T * C3 * es;
        const char *q = (const char *)qkv + base, *k = q + (size_t)C * es, *v = k + (size_t)C * es;
        char *dq = (char *)dqkv + base, *dk = dq + (size_t)C * es, *dv = dk + (size_t)C * es;
        const char *a = (const char *)att + (size_t)b * NH * TT * es;
        const char *dy = (const char *)dout + (size_t)b * T * C * es;
        /* datt [t, s] = dy v^T: like the scores, with dy for q */
        heads_gemm(c, dt, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f, v, C3, hs, dy, C, hs, datt, T,
                   (long long)TT, NH, "attention backward datt");
        /* dv^T [hs, Ts] = dy^T att */
        heads_gemm(c, dt, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, dy, C, hs, a, T, (long long)TT,
                   dv, C3, hs, NH, "attention backward dv");
        BP_DISPATCH(dt, softmax_backward, c, datt, a, (size_t)NH * T, T, scale);
        BP_LAUNCHED(c, "attention softmax backward");
        /* dq^T [hs, Tt] = k^T ds^T */
        heads_gemm(c, dt, CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, k, C3, hs, datt, T,
                   (long long)TT, dq, C3, hs, NH, "attention backward dq");
        /* dk^T [hs, Ts] = q^T ds */
        heads_gemm(c, dt, CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, q, C3, hs, datt, T,
                   (long long)TT, dk, C3, hs, NH, "attention backward dk");
    }
}

/* Layer normalization (nn/layernorm.c), one warp per row.
 *
 *   x [N, C] -> y [N, C] = (x - mean) * rstd * w + b,  w, b [C]
 *   mean [N], rstd [N] = 1 / sqrt(var + 1e-5)   fp32, saved for backward
 *   backward, with xhat = (x - mean) * rstd and g = dy * w:
 *     dx [N, C] += rstd * (g - mean(g) - xhat * mean(g * xhat))
 *     dw [C] += sum_n dy * xhat,  db [C] += sum_n dy
 * Statistics are two-pass (mean, then squared deviations) as on the CPU. */
#include "core/cuda/common.cuh"
#include "nn/cuda/layers_cuda.h"

#define LN_EPS 1e-5f
#define ROWS_PER_BLOCK 8 /* warps of 32 */

template <typename T>
__global__ void layernorm_forward_kernel(T *y, float *mean, float *rstd, const T *x, const T *w,
                                         const T *b, int N, int C) {
    int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T *xr = x + (size_t)row * C;
    float s = 0.0f;
    for (int i = lane; i < C; i += 32) s += ld(xr[i]);
    float m = warp_sum(s) / C;
    float ss = 0.0f;
    for (int i = lane; i < C; i += 32) {
        float d = ld(xr[i]) - m;
        ss += d * d;
    }
    float r = 1.0f / sqrtf(warp_sum(ss) / C + LN_EPS);
    T *yr = y + (size_t)row * C;
    for (int i = lane; i < C; i += 32) yr[i] = st<T>((ld(xr[i]) - m) * r * ld(w[i]) + ld(b[i]));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

/* Each warp takes rows in turn; dw and db are summed in shared memory per block
 * (2C floats, dynamic) and added to the global ones atomically at the end. */
template <typename T>
__global__ void layernorm_backward_kernel(T *dx, float *dw, float *db, const T *dy, const T *x,
                                          const T *w, const float *mean, const float *rstd, int N,
                                          int C) {
    extern __shared__ float acc[]; /* dw [C], db [C] */
    for (int i = threadIdx.x; i < 2 * C; i += blockDim.x) acc[i] = 0.0f;
    __syncthreads();
    int lane = threadIdx.x % 32;
    for (int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32; row < N;
         row += gridDim.x * ROWS_PER_BLOCK) {
        size_t off = (size_t)row * C;
        float m = mean[row], r = rstd[row], gs = 0.0f, gxs = 0.0f;
        for (int i = lane; i < C; i += 32) {
            float d = ld(dy[off + i]), xhat = (ld(x[off + i]) - m) * r, g = d * ld(w[i]);
            gs += g;
            gxs += g * xhat;
            atomicAdd(&acc[i], d * xhat);
            atomicAdd(&acc[C + i], d);
        }
        float g_mean = warp_sum(gs) / C, gx_mean = warp_sum(gxs) / C;
        for (int i = lane; i < C; i += 32) {
            float xhat = (ld(x[off + i]) - m) * r, g = ld(dy[off + i]) * ld(w[i]);
            dx[off + i] = st<T>(ld(dx[off + i]) + r * (g - g_mean - xhat * gx_mean));
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        atomicAdd(&dw[i], acc[i]);
        atomicAdd(&db[i], acc[C + i]);
    }
}

template <typename T>
static void forward(bp_cuda *c, void *y, float *mean, float *rstd, const void *x, const void *w,
                    const void *b, int N, int C) {
    unsigned blocks = (unsigned)((N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
    layernorm_forward_kernel<T><<<blocks, 32 * ROWS_PER_BLOCK, 0, c->stream>>>(
        (T *)y, mean, rstd, (const T *)x, (const T *)w, (const T *)b, N, C);
}

template <typename T>
static void backward(bp_cuda *c, void *dx, float *dw, float *db, const void *dy, const void *x,
                     const void *w, const float *mean, const float *rstd, int N, int C) {
    size_t shared = 2 * (size_t)C * sizeof(float);
    if (shared > 48 * 1024) {
        bp_cuda_failed(c, (int)cudaErrorInvalidValue, "layernorm backward: C above 6144");
        return;
    }
    int rows = (N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, most = 4 * c->sms;
    unsigned blocks = (unsigned)(rows < most ? rows : most);
    layernorm_backward_kernel<T><<<blocks, 32 * ROWS_PER_BLOCK, shared, c->stream>>>(
        (T *)dx, dw, db, (const T *)dy, (const T *)x, (const T *)w, mean, rstd, N, C);
}

void bp_cu_layernorm_forward(bp_cuda *c, bp_cuda_dtype dt, void *y, float *mean, float *rstd,
                             const void *x, const void *w, const void *b, int N, int C) {
    if (N == 0) return;
    BP_DISPATCH(dt, forward, c, y, mean, rstd, x, w, b, N, C);
    BP_LAUNCHED(c, "layernorm forward");
}

void bp_cu_layernorm_backward(bp_cuda *c, bp_cuda_dtype dt, void *dx, float *dw, float *db,
                              const void *dy, const void *x, const void *w, const float *mean,
                              const float *rstd, int N, int C) {
    if (N == 0) return;
    BP_DISPATCH(dt, backward, c, dx, dw, db, dy, x, w, mean, rstd, N, C);
    BP_LAUNCHED(c, "layernorm backward");
}

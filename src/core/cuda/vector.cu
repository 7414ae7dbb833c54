/* Kernels of the backend table's vector operations and optimizer updates (vector.h).
 * Each per-element formula is the cpu backend's, written in the same order, and this
 * file is compiled without fused multiply-adds (cmake/cuda.cmake), as the cpu code
 * is: the element-wise results are the cpu's bits. */
#include <math.h>

#include "core/cuda/common.cuh"
#include "core/cuda/vector.h"

/* One double per block: the block's threads each sum a grid-stride slice, then the
 * block adds them in a fixed tree order. */
__global__ void sumsq_parts_kernel(double *parts, const float *x, size_t n) {
    __shared__ double part[32];
    double s = 0.0;
    BP_FOR_N(i, n) s += (double)x[i] * (double)x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)(blockDim.x / 32) ? part[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) parts[blockIdx.x] = s;
    }
}

/* The partials in index order on one thread: few of them, and the order is fixed. */
__global__ void sumsq_total_kernel(double *out, const double *parts, unsigned nparts) {
    double s = 0.0;
    for (unsigned i = 0; i < nparts; i++) s += parts[i];
    *out = s;
}

void bp_cu_sumsq(bp_cuda *c, double *out, double *parts, const float *x, size_t n) {
    unsigned blocks = n ? bp_blocks(n, 256) : 1;
    if (blocks > BP_CU_SUMSQ_PARTS) blocks = BP_CU_SUMSQ_PARTS;
    if (n)
        sumsq_parts_kernel<<<blocks, 256, 0, c->stream>>>(parts, x, n);
    else
        bp_cuda_failed(c, (int)cudaMemsetAsync(parts, 0, sizeof *parts, c->stream), "sumsq");
    sumsq_total_kernel<<<1, 1, 0, c->stream>>>(out, parts, blocks);
    BP_LAUNCHED(c, "sum of squares");
}

__global__ void nonfinite_kernel(int *flag, float *x, size_t n, bool zero) {
    BP_FOR_N(i, n) if (!isfinite(x[i])) {
        *flag = 1;
        if (zero) x[i] = 0.0f;
    }
}

void bp_cu_nonfinite(bp_cuda *c, int *flag, float *x, size_t n, bool zero) {
    if (n == 0) return;
    nonfinite_kernel<<<bp_blocks(n, 256), 256, 0, c->stream>>>(flag, x, n, zero);
    BP_LAUNCHED(c, "finite check");
}

__global__ void scale_kernel(float *x, size_t n, float a) { BP_FOR_N(i, n) x[i] *= a; }

void bp_cu_scale(bp_cuda *c, float *x, size_t n, float a) {
    if (n == 0) return;
    scale_kernel<<<bp_blocks(n, 256), 256, 0, c->stream>>>(x, n, a);
    BP_LAUNCHED(c, "scale");
}

__global__ void axpy_kernel(float *y, size_t n, float a, const float *x) {
    BP_FOR_N(i, n) y[i] += a * x[i];
}

void bp_cu_axpy(bp_cuda *c, float *y, size_t n, float a, const float *x) {
    if (n == 0) return;
    axpy_kernel<<<bp_blocks(n, 256), 256, 0, c->stream>>>(y, n, a, x);
    BP_LAUNCHED(c, "axpy");
}

__global__ void fill_kernel(float *x, size_t n, float v) { BP_FOR_N(i, n) x[i] = v; }

void bp_cu_fill(bp_cuda *c, float *x, size_t n, float v) {
    if (n == 0) return;
    fill_kernel<<<bp_blocks(n, 256), 256, 0, c->stream>>>(x, n, v);
    BP_LAUNCHED(c, "fill");
}

__global__ void elastic_pull_kernel(float *w, const float *center, float *diff, size_t n,
                                    float alpha, bool accumulate) {
    BP_FOR_N(i, n) {
        float d = alpha * (w[i] - center[i]);
        w[i] -= d;
        diff[i] = accumulate ? diff[i] + d : d;
    }
}

void bp_cu_elastic_pull(bp_cuda *c, float *w, const float *center, float *diff, size_t n,
                        float alpha, bool accumulate) {
    if (n == 0) return;
    elastic_pull_kernel<<<bp_blocks(n, 256), 256, 0, c->stream>>>(w, center, diff, n, alpha,
                                                                  accumulate);
    BP_LAUNCHED(c, "elastic pull");
}

/* Without contraction into fused multiply-adds, as the cpu's loop. */
__global__ void outer_step_kernel(float *g, float *m, const float *d, float *w, size_t n, float lr,
                                  float mu, float mix) {
    BP_FOR_N(i, n) {
        float mi = __fadd_rn(__fmul_rn(mu, m[i]), d[i]);
        float gi = __fsub_rn(g[i], __fmul_rn(lr, __fadd_rn(d[i], __fmul_rn(mu, mi))));
        m[i] = mi;
        g[i] = gi;
        w[i] = mix == 0.0f ? gi : __fadd_rn(__fmul_rn(mix, w[i]), __fmul_rn(1.0f - mix, gi));
    }
}

void bp_cu_outer_step(bp_cuda *c, float *g, float *m, const float *d, float *w, size_t n, float lr,
                      float mu, float mix) {
    if (n == 0) return;
    outer_step_kernel<<<bp_blocks(n, 256), 256, 0, c->stream>>>(g, m, d, w, n, lr, mu, mix);
    BP_LAUNCHED(c, "outer step");
}

/* ---- the optimizer updates: the constants come from the host (see bp_cu_update) -- */

__global__ void sgd_kernel(float *p, const float *g, float *buf, size_t n, float mu, float wd,
                           float rate) {
    BP_FOR_N(i, n) {
        float d = g[i] + wd * p[i];
        float b = mu * buf[i] + d;
        buf[i] = b;
        p[i] -= rate * b;
    }
}

__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, float b1,
                             float b2, float decay, float step, float inv_sqrt_bc2, float eps) {
    BP_FOR_N(i, n) {
        float gi = g[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] * decay - step * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
    }
}

__global__ void momentum_kernel(const float *g, float *m, size_t n, float b1) {
    BP_FOR_N(i, n) m[i] = b1 * m[i] + (1.0f - b1) * g[i];
}

/* QAdam: with `moments`, m and v first follow AdamW's rule on g + wd p. */
__global__ void qadam_kernel(float *p, const float *g, float *m, float *v, size_t n, bool moments,
                             float b1, float b2, float wd, float step, float sqrt_bc2, float eps) {
    BP_FOR_N(i, n) {
        if (moments) {
            float gi = g[i] + wd * p[i];
            m[i] = b1 * m[i] + (1.0f - b1) * gi;
            v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        }
        p[i] -= step * m[i] / (sqrtf(v[i]) / sqrt_bc2 + eps);
    }
}

void bp_cu_update(bp_cuda *c, const bp_update_args *a, float *p, const float *g, float *m, float *v,
                  size_t off, size_t len) {
    if (len == 0) return;
    unsigned blocks = bp_blocks(len, 256);
    p += off, g += off, m += off;
    if (v) v += off;
    const float b1 = (float)a->beta1, b2 = (float)a->beta2, eps = (float)a->eps;
    double bc1 = 1.0 - pow(a->beta1, (double)a->t), bc2 = 1.0 - pow(a->beta2, (double)a->t);
    switch (a->kind) {
    case BP_UPDATE_SGD:
        sgd_kernel<<<blocks, 256, 0, c->stream>>>(p, g, m, len, (float)a->momentum,
                                                  (float)a->weight_decay, (float)a->lr);
        break;
    case BP_UPDATE_ADAMW:
        adamw_kernel<<<blocks, 256, 0, c->stream>>>(
            p, g, m, v, len, b1, b2, (float)(1.0 - a->lr * a->weight_decay), (float)(a->lr / bc1),
            (float)(1.0 / sqrt(bc2)), eps);
        break;
    case BP_UPDATE_MOMENTUM: momentum_kernel<<<blocks, 256, 0, c->stream>>>(g, m, len, b1); break;
    case BP_UPDATE_QADAM:
        qadam_kernel<<<blocks, 256, 0, c->stream>>>(p, g, m, v, len, a->moments, b1, b2,
                                                    (float)a->weight_decay, (float)(a->lr / bc1),
                                                    (float)sqrt(bc2), eps);
        break;
    }
    BP_LAUNCHED(c, "optimizer update");
}

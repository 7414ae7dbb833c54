/* The optimizer's kernels (nn/optim.c): the gradient's sum of squares for its norm,
 * the clipping scale, AdamW and SGD. The update constants (bias corrections folded
 * into step and inv_sqrt_bc2) are computed on the host in double exactly as the CPU
 * optimizer does, so both apply the same fp32 formula to every element. */
#include "core/cuda/common.cuh"
#include "nn/cuda/layers_cuda.h"

/* Per-thread double sums, reduced in the block, added atomically to *out. */
__global__ void sumsq_kernel(double *out, const float *g, size_t n) {
    __shared__ double part[32];
    double s = 0.0;
    BP_FOR_N(i, n) s += (double)g[i] * (double)g[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)(blockDim.x / 32) ? part[lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) atomicAdd(out, s);
    }
}

__global__ void scale_kernel(float *x, size_t n, float s) { BP_FOR_N(i, n) x[i] *= s; }

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

__global__ void sgd_kernel(float *p, const float *g, float *buf, size_t n, float mu, float wd,
                           float rate) {
    BP_FOR_N(i, n) {
        float d = g[i] + wd * p[i];
        float b = mu * buf[i] + d;
        buf[i] = b;
        p[i] -= rate * b;
    }
}

void bp_cu_sumsq(bp_cuda *c, double *sumsq, const float *g, size_t n) {
    bp_cuda_failed(c, (int)cudaMemsetAsync(sumsq, 0, sizeof *sumsq, c->stream), "sumsq");
    if (n == 0) return;
    unsigned blocks = bp_blocks(n, 256), most = (unsigned)(8 * c->sms);
    sumsq_kernel<<<blocks < most ? blocks : most, 256, 0, c->stream>>>(sumsq, g, n);
    BP_LAUNCHED(c, "gradient norm");
}

void bp_cu_scale(bp_cuda *c, float *x, size_t n, float s) {
    if (n == 0) return;
    scale_kernel<<<bp_blocks(n, 256), 256, 0, c->stream>>>(x, n, s);
    BP_LAUNCHED(c, "scale");
}

void bp_cu_adamw(bp_cuda *c, float *p, const float *g, float *m, float *v, size_t n, float b1,
                 float b2, float decay, float step, float inv_sqrt_bc2, float eps) {
    if (n == 0) return;
    adamw_kernel<<<bp_blocks(n, 256), 256, 0, c->stream>>>(p, g, m, v, n, b1, b2, decay, step,
                                                            inv_sqrt_bc2, eps);
    BP_LAUNCHED(c, "adamw");
}

void bp_cu_sgd(bp_cuda *c, float *p, const float *g, float *buf, size_t n, float mu, float wd,
               float rate) {
    if (n == 0) return;
    sgd_kernel<<<bp_blocks(n, 256), 256, 0, c->stream>>>(p, g, buf, n, mu, wd, rate);
    BP_LAUNCHED(c, "sgd");
}

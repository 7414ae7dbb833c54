/* Softmax + cross-entropy (nn/crossentropy.c).
 *
 *   logits [N, V], targets [N] (device) -> lse [N] = log sum_v exp(logits[n, v]) (fp32,
 *   saved), loss [N] = lse - logits[n, targets[n]]; the caller averages in double
 *   backward: dlogits [N, V] = scale / N * (exp(logits - lse) - onehot(targets))
 * Forward is one block per row (a max, then a sum of exponentials: V may be 50257);
 * backward, which needs no reduction thanks to lse, is elementwise. */
#include "core/cuda/common.cuh"
#include "nn/cuda/layers_cuda.h"

template <typename T>
__global__ void crossentropy_forward_kernel(float *lse, float *loss, const T *logits,
                                            const int32_t *targets, int V) {
    __shared__ float shared[32];
    const T *row = logits + (size_t)blockIdx.x * V;
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < V; i += blockDim.x) mx = fmaxf(mx, ld(row[i]));
    mx = block_max(mx, shared);
    float sum = 0.0f;
    for (int i = threadIdx.x; i < V; i += blockDim.x) sum += expf(ld(row[i]) - mx);
    sum = block_sum(sum, shared);
    if (threadIdx.x == 0) {
        float l = mx + logf(sum);
        lse[blockIdx.x] = l;
        if (loss) loss[blockIdx.x] = l - ld(row[targets[blockIdx.x]]);
    }
}

template <typename T>
__global__ void crossentropy_backward_kernel(T *dlogits, const T *logits, const float *lse,
                                             const int32_t *targets, int V, size_t n, float k) {
    BP_FOR_N(i, n) {
        size_t r = i / V;
        int v = (int)(i % V);
        float d = expf(ld(logits[i]) - lse[r]) * k;
        dlogits[i] = st<T>(v == targets[r] ? d - k : d);
    }
}

template <typename T>
static void forward(bp_cuda *c, float *lse, float *loss, const void *logits,
                    const int32_t *targets, int N, int V) {
    crossentropy_forward_kernel<T><<<(unsigned)N, 256, 0, c->stream>>>(lse, loss, (const T *)logits,
                                                                        targets, V);
}

template <typename T>
static void backward(bp_cuda *c, void *dlogits, const void *logits, const float *lse,
                     const int32_t *targets, int N, int V, float scale) {
    size_t n = (size_t)N * V;
    crossentropy_backward_kernel<T><<<bp_blocks(n, 256), 256, 0, c->stream>>>(
        (T *)dlogits, (const T *)logits, lse, targets, V, n, scale / (float)N);
}

void bp_cu_crossentropy_forward(bp_cuda *c, bp_cuda_dtype dt, float *lse, float *loss,
                                const void *logits, const int32_t *targets, int N, int V) {
    if (N == 0) return;
    BP_DISPATCH(dt, forward, c, lse, targets ? loss : NULL, logits, targets, N, V);
    BP_LAUNCHED(c, "cross-entropy forward");
}

void bp_cu_crossentropy_backward(bp_cuda *c, bp_cuda_dtype dt, void *dlogits, const void *logits,
                                 const float *lse, const int32_t *targets, int N, int V,
                                 float scale) {
    if (N == 0) return;
    BP_DISPATCH(dt, backward, c, dlogits, logits, lse, targets, N, V, scale);
    BP_LAUNCHED(c, "cross-entropy backward");
}

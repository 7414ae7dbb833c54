/* Token plus position embedding (nn/embedding.c).
 *
 *   tokens [B, T] (device), wte [V, C], wpe [maxT, C] -> out [B, T, C] = wte[tok] + wpe[t]
 *   backward: dwte [V, C] += dout rows scattered by token, dwpe [maxT, C] += dout summed
 *   over b; fp32 atomics (the order of the additions, not the result, is free). */
#include "core/cuda/common.cuh"
#include "nn/cuda/layers_cuda.h"

template <typename T>
__global__ void embedding_forward_kernel(T *out, const int32_t *tokens, const T *wte, const T *wpe,
                                         int T_, int C, size_t n) {
    BP_FOR_N(i, n) {
        size_t bt = i / C;
        int ch = (int)(i % C), t = (int)(bt % T_);
        out[i] = st<T>(ld(wte[(size_t)tokens[bt] * C + ch]) + ld(wpe[(size_t)t * C + ch]));
    }
}

template <typename T>
__global__ void embedding_backward_kernel(float *dwte, float *dwpe, const T *dout,
                                          const int32_t *tokens, int T_, int C, size_t n) {
    BP_FOR_N(i, n) {
        size_t bt = i / C;
        int ch = (int)(i % C), t = (int)(bt % T_);
        float d = ld(dout[i]);
        atomicAdd(&dwte[(size_t)tokens[bt] * C + ch], d);
        atomicAdd(&dwpe[(size_t)t * C + ch], d);
    }
}

template <typename T>
static void forward(bp_cuda *c, void *out, const int32_t *tokens, const void *wte, const void *wpe,
                    int B, int T_, int C) {
    size_t n = (size_t)B * T_ * C;
    embedding_forward_kernel<T><<<bp_blocks(n, 256), 256, 0, c->stream>>>(
        (T *)out, tokens, (const T *)wte, (const T *)wpe, T_, C, n);
}

template <typename T>
static void backward(bp_cuda *c, float *dwte, float *dwpe, const void *dout, const int32_t *tokens,
                     int B, int T_, int C) {
    size_t n = (size_t)B * T_ * C;
    embedding_backward_kernel<T><<<bp_blocks(n, 256), 256, 0, c->stream>>>(
        dwte, dwpe, (const T *)dout, tokens, T_, C, n);
}

void bp_cu_embedding_forward(bp_cuda *c, bp_cuda_dtype dt, void *out, const int32_t *tokens,
                             const void *wte, const void *wpe, int B, int T, int C) {
    if ((size_t)B * T * C == 0) return;
    BP_DISPATCH(dt, forward, c, out, tokens, wte, wpe, B, T, C);
    BP_LAUNCHED(c, "embedding forward");
}

void bp_cu_embedding_backward(bp_cuda *c, bp_cuda_dtype dt, float *dwte, float *dwpe,
                              const void *dout, const int32_t *tokens, int B, int T, int C) {
    if ((size_t)B * T * C == 0) return;
    BP_DISPATCH(dt, backward, c, dwte, dwpe, dout, tokens, B, T, C);
    BP_LAUNCHED(c, "embedding backward");
}

/* The elementwise layers: GELU (nn/gelu.c), ReLU (nn/relu.c), residual (nn/residual.c).
 *
 *   GELU, tanh approximation: y = x * s,  s = sigmoid(2u) = 0.5 (1 + tanh(u)),
 *     u = sqrt(2/pi) (x + 0.044715 x^3);  dy/dx = s + x s (1 - s) 2 u'
 *     (the CPU layer's identity, so both compute the same function the same way)
 *   ReLU: y = max(x, 0); dx = dy where y > 0
 *   residual: out = a + b
 * All x, y [n] of type dt; fp32 arithmetic. */
#include "core/cuda/common.cuh"
#include "nn/cuda/layers_cuda.h"

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

__device__ __forceinline__ float gelu_gate(float x) {
    float u = GELU_K * (x + GELU_A * x * x * x);
    return 1.0f / (1.0f + expf(-2.0f * u));
}

template <typename T> __global__ void gelu_forward_kernel(T *y, const T *x, size_t n) {
    BP_FOR_N(i, n) {
        float v = ld(x[i]);
        y[i] = st<T>(v * gelu_gate(v));
    }
}

template <typename T> __global__ void gelu_backward_kernel(T *dx, const T *x, const T *dy, size_t n) {
    BP_FOR_N(i, n) {
        float v = ld(x[i]), s = gelu_gate(v), du = GELU_K * (1.0f + 3.0f * GELU_A * v * v);
        dx[i] = st<T>(ld(dy[i]) * (s + v * s * (1.0f - s) * 2.0f * du));
    }
}

template <typename T> __global__ void relu_forward_kernel(T *y, const T *x, size_t n) {
    BP_FOR_N(i, n) y[i] = st<T>(fmaxf(ld(x[i]), 0.0f));
}

template <typename T> __global__ void relu_backward_kernel(T *dx, const T *y, const T *dy, size_t n) {
    BP_FOR_N(i, n) dx[i] = st<T>(ld(y[i]) > 0.0f ? ld(dy[i]) : 0.0f);
}

template <typename T> __global__ void residual_kernel(T *out, const T *a, const T *b, size_t n) {
    BP_FOR_N(i, n) out[i] = st<T>(ld(a[i]) + ld(b[i]));
}

template <typename T> static void gelu_f(bp_cuda *c, void *y, const void *x, size_t n) {
    gelu_forward_kernel<T><<<bp_blocks(n, 256), 256, 0, c->stream>>>((T *)y, (const T *)x, n);
}
template <typename T>
static void gelu_b(bp_cuda *c, void *dx, const void *x, const void *dy, size_t n) {
    gelu_backward_kernel<T><<<bp_blocks(n, 256), 256, 0, c->stream>>>((T *)dx, (const T *)x,
                                                                        (const T *)dy, n);
}
template <typename T> static void relu_f(bp_cuda *c, void *y, const void *x, size_t n) {
    relu_forward_kernel<T><<<bp_blocks(n, 256), 256, 0, c->stream>>>((T *)y, (const T *)x, n);
}
template <typename T>
static void relu_b(bp_cuda *c, void *dx, const void *y, const void *dy, size_t n) {
    relu_backward_kernel<T><<<bp_blocks(n, 256), 256, 0, c->stream>>>((T *)dx, (const T *)y,
                                                                        (const T *)dy, n);
}
template <typename T>
static void residual(bp_cuda *c, void *out, const void *a, const void *b, size_t n) {
    residual_kernel<T><<<bp_blocks(n, 256), 256, 0, c->stream>>>((T *)out, (const T *)a,
                                                                   (const T *)b, n);
}

void bp_cu_gelu_forward(bp_cuda *c, bp_cuda_dtype dt, void *y, const void *x, size_t n) {
    if (n == 0) return;
    BP_DISPATCH(dt, gelu_f, c, y, x, n);
    BP_LAUNCHED(c, "gelu forward");
}

void bp_cu_gelu_backward(bp_cuda *c, bp_cuda_dtype dt, void *dx, const void *x, const void *dy,
                         size_t n) {
    if (n == 0) return;
    BP_DISPATCH(dt, gelu_b, c, dx, x, dy, n);
    BP_LAUNCHED(c, "gelu backward");
}

void bp_cu_relu_forward(bp_cuda *c, bp_cuda_dtype dt, void *y, const void *x, size_t n) {
    if (n == 0) return;
    BP_DISPATCH(dt, relu_f, c, y, x, n);
    BP_LAUNCHED(c, "relu forward");
}

void bp_cu_relu_backward(bp_cuda *c, bp_cuda_dtype dt, void *dx, const void *y, const void *dy,
                         size_t n) {
    if (n == 0) return;
    BP_DISPATCH(dt, relu_b, c, dx, y, dy, n);
    BP_LAUNCHED(c, "relu backward");
}

void bp_cu_residual_forward(bp_cuda *c, bp_cuda_dtype dt, void *out, const void *a, const void *b,
                            size_t n) {
    if (n == 0) return;
    BP_DISPATCH(dt, residual, c, out, a, b, n);
    BP_LAUNCHED(c, "residual forward");
}

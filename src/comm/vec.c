/* Element-wise loops of the collectives. They run in blocks with a constant trip
 * count because gcc's -O2 cost model vectorizes only such loops. */
#include "comm/internal.h"

enum { BLOCK = 64 };

void bpc_vec_add(float *restrict y, const float *restrict x, size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int j = 0; j < BLOCK; j++) y[i + j] += x[i + j];
    for (; i < n; i++) y[i] += x[i];
}

void bpc_vec_scale(float *y, float s, size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int j = 0; j < BLOCK; j++) y[i + j] *= s;
    for (; i < n; i++) y[i] *= s;
}

static inline float ring_z(float x, float l, float r, float w) {
    return x + l / 3.0f + r / 3.0f - 5.0f * w / 3.0f;
}

void bpc_vec_ring_z(float *restrict z, const float *restrict x, const float *restrict l,
                    const float *restrict r, const float *restrict w, size_t n) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int j = 0; j < BLOCK; j++) z[i + j] = ring_z(x[i + j], l[i + j], r[i + j], w[i + j]);
    for (; i < n; i++) z[i] = ring_z(x[i], l[i], r[i], w[i]);
}

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

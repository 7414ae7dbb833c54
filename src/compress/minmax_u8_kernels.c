/* MinMaxUInt8's plain loops (minmax_u8_kernels.h), and the choice of the fastest
 * version this processor runs. */
#include "compress/minmax_u8_kernels.h"

#include <string.h>

bool bp_minmax_range_tail(const float *x, size_t from, size_t n, float *mn, float *mx, float bad) {
    float l = *mn, h = *mx;
    for (size_t i = from; i < n; i++) {
        l = x[i] < l ? x[i] : l;
        h = x[i] > h ? x[i] : h;
        bad += x[i] - x[i]; /* 0 for a finite value, NaN otherwise; NaN stays */
    }
    *mn = l;
    *mx = h;
    return bad == 0.0f;
}

/* The formula's value is within [0, 255] unless float rounding of lb = ub - 255
 * at magnitudes of 2^24 and more moves it out; clamping keeps the byte nearest. */
void bp_minmax_quantize_tail(const float *restrict x, size_t from, size_t n, float scale,
                             float ub, float lb, uint8_t *restrict q) {
    for (size_t i = from; i < n; i++) {
        float r = (x[i] * scale + BP_RINT_MAGIC) - BP_RINT_MAGIC;
        float v = (r < ub ? r : ub) - lb;
        v = v > 0.0f ? v : 0.0f;
        q[i] = (uint8_t)(v < 255.0f ? v : 255.0f);
    }
}

void bp_minmax_dequantize_tail(const uint8_t *restrict q, size_t from, size_t n, float scale,
                               float lb, float *restrict x) {
    for (size_t i = from; i < n; i++) x[i] = ((float)q[i] + lb) / scale;
}

static bool plain_range(const float *x, size_t n, float *mn, float *mx) {
    *mn = *mx = x[0];
    return bp_minmax_range_tail(x, 0, n, mn, mx, 0.0f);
}

static void plain_quantize(const float *restrict x, size_t n, float scale, float ub, float lb,
                           uint8_t *restrict q) {
    bp_minmax_quantize_tail(x, 0, n, scale, ub, lb, q);
}

/* In blocks of a constant trip count, which gcc's -O2 cost model vectorizes. */
static void plain_dequantize(const uint8_t *restrict q, size_t n, float scale, float lb,
                             float *restrict x) {
    enum { BLOCK = 64 };
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int j = 0; j < BLOCK; j++) x[i + j] = ((float)q[i + j] + lb) / scale;
    bp_minmax_dequantize_tail(q, i, n, scale, lb, x);
}

static const bp_minmax_kernels plain = {"plain", plain_range, plain_quantize, plain_dequantize};

#if BP_MINMAX_X86
static bool has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}
#endif

const bp_minmax_kernels *bp_minmax_kernels_for(const char *isa) {
    if (strcmp(isa, "plain") == 0) return &plain;
#if BP_MINMAX_X86
    if (strcmp(isa, "sse2") == 0) return &bp_minmax_sse2;
    if (strcmp(isa, "avx2") == 0 && has_avx2()) return &bp_minmax_avx2;
#endif
    return NULL;
}

const bp_minmax_kernels *bp_minmax_kernels_best(void) {
    const bp_minmax_kernels *k = bp_minmax_kernels_for("avx2");
    if (!k) k = bp_minmax_kernels_for("sse2");
    return k ? k : &plain;
}

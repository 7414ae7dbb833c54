/* MinMaxUInt8's loops with SSE2 (all of x86-64) and AVX2 (where the processor has
 * it; compiled with a function attribute, so the build needs no -mavx2).
 * Compilers turn neither a float min/max reduction nor the float-to-byte narrowing
 * into the instructions that exist for them (minps, packuswb), and these loops are
 * most of the codec's time. Each performs on every element the float32 operations
 * of the plain loops (minmax_u8_kernels.c) in the same order, so the bits agree;
 * the tails run the plain loops. */
#include "compress/minmax_u8_kernels.h"

#if BP_MINMAX_X86
#include <immintrin.h>

/* ---- SSE2 ------------------------------------------------------------------- */

static bool sse2_range(const float *x, size_t n, float *mn, float *mx) {
    __m128 lo[2], hi[2], bad[2];
    lo[0] = lo[1] = hi[0] = hi[1] = _mm_set1_ps(x[0]);
    bad[0] = bad[1] = _mm_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 2; k++) {
            __m128 v = _mm_loadu_ps(x + i + 4 * k);
            lo[k] = _mm_min_ps(lo[k], v);
            hi[k] = _mm_max_ps(hi[k], v);
            bad[k] = _mm_add_ps(bad[k], _mm_sub_ps(v, v));
        }
    float l[8], h[8], b[8];
    for (int k = 0; k < 2; k++) {
        _mm_storeu_ps(l + 4 * k, lo[k]);
        _mm_storeu_ps(h + 4 * k, hi[k]);
        _mm_storeu_ps(b + 4 * k, bad[k]);
    }
    *mn = l[0], *mx = h[0];
    bp_minmax_range_tail(l, 1, 8, mn, mx, 0.0f);
    bp_minmax_range_tail(h, 0, 8, mn, mx, 0.0f);
    float sum = b[0] + b[1] + b[2] + b[3] + b[4] + b[5] + b[6] + b[7];
    return bp_minmax_range_tail(x, i, n, mn, mx, sum);
}

/* v is a whole number of magnitude below 2^23 when converted; the saturating packs
 * (int32 -> int16 -> uint8) clamp it to [0, 255] as the plain loop does. */
static void sse2_quantize(const float *restrict x, size_t n, float scale, float ub, float lb,
                          uint8_t *restrict q) {
    const __m128 s = _mm_set1_ps(scale), magic = _mm_set1_ps(BP_RINT_MAGIC), u = _mm_set1_ps(ub),
                 b = _mm_set1_ps(lb);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i w[4];
        for (int k = 0; k < 4; k++) {
            __m128 v = _mm_mul_ps(_mm_loadu_ps(x + i + 4 * k), s);
            v = _mm_sub_ps(_mm_add_ps(v, magic), magic);
            w[k] = _mm_cvttps_epi32(_mm_sub_ps(_mm_min_ps(v, u), b));
        }
        __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(w[0], w[1]), _mm_packs_epi32(w[2], w[3]));
        _mm_storeu_si128((__m128i *)(q + i), bytes);
    }
    bp_minmax_quantize_tail(x, i, n, scale, ub, lb, q);
}

static void sse2_dequantize(const uint8_t *restrict q, size_t n, float scale, float lb,
                            float *restrict x) {
    const __m128 s = _mm_set1_ps(scale), b = _mm_set1_ps(lb);
    const __m128i zero = _mm_setzero_si128();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(q + i));
        __m128i lo = _mm_unpacklo_epi8(bytes, zero), hi = _mm_unpackhi_epi8(bytes, zero);
        __m128i d[4] = {_mm_unpacklo_epi16(lo, zero), _mm_unpackhi_epi16(lo, zero),
                        _mm_unpacklo_epi16(hi, zero), _mm_unpackhi_epi16(hi, zero)};
        for (int k = 0; k < 4; k++)
            _mm_storeu_ps(x + i + 4 * k, _mm_div_ps(_mm_add_ps(_mm_cvtepi32_ps(d[k]), b), s));
    }
    bp_minmax_dequantize_tail(q, i, n, scale, lb, x);
}

const bp_minmax_kernels bp_minmax_sse2 = {"sse2", sse2_range, sse2_quantize, sse2_dequantize};

/* ---- AVX2 ------------------------------------------------------------------- */

#define AVX2 __attribute__((target("avx2")))

AVX2 static bool avx2_range(const float *x, size_t n, float *mn, float *mx) {
    __m256 lo[4], hi[4], bad[4];
    for (int k = 0; k < 4; k++) {
        lo[k] = hi[k] = _mm256_set1_ps(x[0]);
        bad[k] = _mm256_setzero_ps();
    }
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            __m256 v = _mm256_loadu_ps(x + i + 8 * k);
            lo[k] = _mm256_min_ps(lo[k], v);
            hi[k] = _mm256_max_ps(hi[k], v);
            bad[k] = _mm256_add_ps(bad[k], _mm256_sub_ps(v, v));
        }
    float l[32], h[32], b[32];
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps(l + 8 * k, lo[k]);
        _mm256_storeu_ps(h + 8 * k, hi[k]);
        _mm256_storeu_ps(b + 8 * k, bad[k]);
    }
    float sum = 0.0f;
    for (int j = 0; j < 32; j++) sum += b[j];
    *mn = l[0], *mx = h[0];
    bp_minmax_range_tail(l, 1, 32, mn, mx, 0.0f);
    bp_minmax_range_tail(h, 0, 32, mn, mx, 0.0f);
    return bp_minmax_range_tail(x, i, n, mn, mx, sum);
}

/* packs and packus work within each 128-bit lane; the permutation puts the four
 * groups of 8 bytes back in element order. */
AVX2 static void avx2_quantize(const float *restrict x, size_t n, float scale, float ub, float lb,
                               uint8_t *restrict q) {
    const __m256 s = _mm256_set1_ps(scale), magic = _mm256_set1_ps(BP_RINT_MAGIC),
                 u = _mm256_set1_ps(ub), b = _mm256_set1_ps(lb);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256i w[4];
        for (int k = 0; k < 4; k++) {
            __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * k), s);
            v = _mm256_sub_ps(_mm256_add_ps(v, magic), magic);
            w[k] = _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_min_ps(v, u), b));
        }
        __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(w[0], w[1]),
                                            _mm256_packs_epi32(w[2], w[3]));
        _mm256_storeu_si256((__m256i *)(q + i), _mm256_permutevar8x32_epi32(bytes, order));
    }
    bp_minmax_quantize_tail(x, i, n, scale, ub, lb, q);
}

AVX2 static void avx2_dequantize(const uint8_t *restrict q, size_t n, float scale, float lb,
                                 float *restrict x) {
    const __m256 s = _mm256_set1_ps(scale), b = _mm256_set1_ps(lb);
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            __m128i bytes = _mm_loadl_epi64((const __m128i *)(q + i + 8 * k));
            __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
            _mm256_storeu_ps(x + i + 8 * k, _mm256_div_ps(_mm256_add_ps(v, b), s));
        }
    bp_minmax_dequantize_tail(q, i, n, scale, lb, x);
}

const bp_minmax_kernels bp_minmax_avx2 = {"avx2", avx2_range, avx2_quantize, avx2_dequantize};

#else
typedef int bp_minmax_x86_unused; /* ISO C wants something in a translation unit */
#endif

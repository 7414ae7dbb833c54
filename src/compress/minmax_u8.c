/* MinMaxUInt8 (compress.h has the formula and the wire format).
 *
 * Speed. rint is done with the 1.5 * 2^23 trick (exact round-half-even for
 * |v| <= 2^22) because rintf is a library call on baseline x86-64; chunks whose
 * scaled values are larger fall back to rintf, with the same bits. The range scan
 * and the quantization use SSE2 where the compiler has it (all of x86-64):
 * compilers turn neither a float min/max reduction nor the float-to-byte
 * narrowing into the single instructions that exist for them (minps, packuswb),
 * and these two loops are most of the codec's time. The plain loops below serve
 * other machines and the tail of every buffer, and compute the same bits:
 * the SSE2 operations are the same float32 operations in the same order.
 * BP_PORTABLE forces the plain loops (the tests check both). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"

#if defined(__SSE2__) && !defined(BP_PORTABLE)
#include <emmintrin.h>
#define USE_SSE2 1
#else
#define USE_SSE2 0
#endif

/* Decoding runs in blocks of a constant trip count, which gcc's -O2 cost model
 * vectorizes. */
enum { BLOCK = 64 };

#define HEADER_BYTES (2 * sizeof(float))
#define RINT_MAGIC 12582912.0f      /* 1.5 * 2^23 */
#define RINT_MAGIC_LIMIT 4194304.0f /* 2^22 */

typedef struct quant {
    float scale, ub, lb;
} quant;

/* The formula's constants for a chunk with range [mn, mx]; false when they
 * overflow float (then no byte could represent the chunk). */
static bool quant_of(float mn, float mx, quant *k) {
    float range = mx - mn;
    k->scale = 255.0f / (range + 1e-7f);
    k->ub = rintf(mx * k->scale);
    k->lb = k->ub - 255.0f;
    return isfinite(range) && isfinite(mn * k->scale) && isfinite(k->ub);
}

/* min, max and whether all values are finite, in one pass: v - v is 0 for a
 * finite v and NaN otherwise, and a sum with a NaN stays NaN. */
static bool min_max(const float *x, size_t n, float *mn, float *mx) {
    float l = x[0], h = x[0], bad = 0.0f;
    size_t i = 0;
#if USE_SSE2
    __m128 lo[2], hi[2], acc[2];
    lo[0] = lo[1] = hi[0] = hi[1] = _mm_set1_ps(x[0]);
    acc[0] = acc[1] = _mm_setzero_ps();
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 2; k++) {
            __m128 v = _mm_loadu_ps(x + i + 4 * k);
            lo[k] = _mm_min_ps(lo[k], v);
            hi[k] = _mm_max_ps(hi[k], v);
            acc[k] = _mm_add_ps(acc[k], _mm_sub_ps(v, v));
        }
    float lanes[3][8];
    for (int k = 0; k < 2; k++) {
        _mm_storeu_ps(lanes[0] + 4 * k, lo[k]);
        _mm_storeu_ps(lanes[1] + 4 * k, hi[k]);
        _mm_storeu_ps(lanes[2] + 4 * k, acc[k]);
    }
    for (int j = 0; j < 8; j++) {
        l = lanes[0][j] < l ? lanes[0][j] : l;
        h = lanes[1][j] > h ? lanes[1][j] : h;
        bad += lanes[2][j];
    }
#endif
    for (; i < n; i++) {
        l = x[i] < l ? x[i] : l;
        h = x[i] > h ? x[i] : h;
        bad += x[i] - x[i];
    }
    *mn = l;
    *mx = h;
    return bad == 0.0f;
}

/* The formula's value is within [0, 255] unless float rounding of lb = ub - 255
 * at magnitudes of 2^24 and more moves it out; clamping keeps the byte nearest. */
static inline uint8_t quantize_one(float rounded, float ub, float lb) {
    float v = (rounded < ub ? rounded : ub) - lb;
    v = v > 0.0f ? v : 0.0f;
    return (uint8_t)(v < 255.0f ? v : 255.0f);
}

/* rint by the magic number; valid for |x * scale| <= 2^22. */
static inline float rint_small(float v) { return (v + RINT_MAGIC) - RINT_MAGIC; }

static void quantize_fast(const float *restrict x, size_t n, float scale, float ub, float lb,
                          uint8_t *restrict q) {
    size_t i = 0;
#if USE_SSE2
    /* v is a whole number of magnitude below 2^23 here; the saturating packs
     * (int32 -> int16 -> uint8) clamp it to [0, 255] as quantize_one does. */
    const __m128 s = _mm_set1_ps(scale), magic = _mm_set1_ps(RINT_MAGIC), u = _mm_set1_ps(ub),
                 b = _mm_set1_ps(lb);
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
#endif
    for (; i < n; i++) q[i] = quantize_one(rint_small(x[i] * scale), ub, lb);
}

static void quantize_slow(const float *restrict x, size_t n, float scale, float ub, float lb,
                          uint8_t *restrict q) {
    for (size_t i = 0; i < n; i++) q[i] = quantize_one(rintf(x[i] * scale), ub, lb);
}

static void dequantize(const uint8_t *restrict q, size_t n, float scale, float lb,
                       float *restrict x) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int j = 0; j < BLOCK; j++) x[i + j] = ((float)q[i + j] + lb) / scale;
    for (; i < n; i++) x[i] = ((float)q[i] + lb) / scale;
}

static size_t mm_encoded_size(const bp_codec *c, size_t n) {
    (void)c;
    return n ? HEADER_BYTES + n : 0;
}

static int mm_encode(bp_codec *c, const float *x, size_t n, void *out, bp_err *err) {
    (void)c;
    if (n == 0) return BP_OK;
    float mn, mx;
    if (!min_max(x, n, &mn, &mx)) return bp_codec_reject_nonfinite("minmax_u8", x, n, err);
    quant k;
    if (!quant_of(mn, mx, &k))
        return bp_fail(err, BP_ENONFINITE,
                       "minmax_u8: chunk range [%g, %g] overflows float when scaled; not encoded",
                       (double)mn, (double)mx);
    unsigned char *o = out;
    memcpy(o, &mn, sizeof mn);
    memcpy(o + sizeof mn, &mx, sizeof mx);
    bool fast = fmaxf(fabsf(mn), fabsf(mx)) * k.scale <= RINT_MAGIC_LIMIT;
    (fast ? quantize_fast : quantize_slow)(x, n, k.scale, k.ub, k.lb, o + HEADER_BYTES);
    return BP_OK;
}

static int mm_decode(const bp_codec *c, const void *in, size_t n, float *x, bp_err *err) {
    (void)c;
    (void)err;
    if (n == 0) return BP_OK;
    const unsigned char *p = in;
    float mn, mx;
    memcpy(&mn, p, sizeof mn);
    memcpy(&mx, p + sizeof mn, sizeof mx);
    quant k;
    quant_of(mn, mx, &k);
    dequantize(p + HEADER_BYTES, n, k.scale, k.lb, x);
    return BP_OK;
}

static void mm_destroy(bp_codec *c) { free(c); }

static const bp_codec_ops minmax_ops = {
    .name = "minmax_u8",
    .encoded_size = mm_encoded_size,
    .encode = mm_encode,
    .decode = mm_decode,
    .destroy = mm_destroy,
};

int bp_codec_minmax_u8_new(bp_codec **out, bp_err *err) {
    *out = malloc(sizeof **out);
    if (!*out) return bp_fail(err, BP_ENOMEM, "minmax_u8: cannot allocate the codec");
    (*out)->ops = &minmax_ops;
    return BP_OK;
}

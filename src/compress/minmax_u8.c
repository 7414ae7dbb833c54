/* MinMaxUInt8 (compress.h has the formula and the wire format).
 *
 * Speed: the loops work on blocks with a constant trip count and independent
 * lanes, which gcc and clang vectorize at -O2, and rint is done with the
 * 1.5 * 2^23 trick (exact round-half-even for |v| <= 2^22) because rintf is a
 * library call on baseline x86-64. Chunks whose scaled values are larger fall back
 * to rintf; both give the same bits. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"

enum { LANES = 8, BLOCK = 64 };

#define HEADER_BYTES (2 * sizeof(float))
#define RINT_MAGIC 12582912.0f /* 1.5 * 2^23 */
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

/* min, max and whether all values are finite, in one pass. */
static bool min_max(const float *x, size_t n, float *mn, float *mx) {
    float lo[LANES], hi[LANES], bad[LANES];
    for (int j = 0; j < LANES; j++) lo[j] = hi[j] = x[0], bad[j] = 0.0f;
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float v = x[i + j];
            lo[j] = v < lo[j] ? v : lo[j];
            hi[j] = v > hi[j] ? v : hi[j];
            bad[j] += v - v; /* NaN from here on if v is NaN or infinite */
        }
    for (; i < n; i++) {
        lo[0] = x[i] < lo[0] ? x[i] : lo[0];
        hi[0] = x[i] > hi[0] ? x[i] : hi[0];
        bad[0] += x[i] - x[i];
    }
    bool finite = true;
    for (int j = 0; j < LANES; j++) {
        lo[0] = lo[j] < lo[0] ? lo[j] : lo[0];
        hi[0] = hi[j] > hi[0] ? hi[j] : hi[0];
        finite = finite && bad[j] == 0.0f;
    }
    *mn = lo[0];
    *mx = hi[0];
    return finite;
}

/* The formula's value is within [0, 255] unless float rounding of lb = ub - 255
 * at magnitudes of 2^24 and more moves it out; clamping keeps the byte nearest. */
static inline uint8_t quantize_one(float rounded, const quant *k) {
    float v = (rounded < k->ub ? rounded : k->ub) - k->lb;
    v = v > 0.0f ? v : 0.0f;
    return (uint8_t)(v < 255.0f ? v : 255.0f);
}

static void quantize_fast(const float *x, size_t n, const quant *k, uint8_t *q) {
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int j = 0; j < BLOCK; j++)
            q[i + j] = quantize_one((x[i + j] * k->scale + RINT_MAGIC) - RINT_MAGIC, k);
    for (; i < n; i++) q[i] = quantize_one((x[i] * k->scale + RINT_MAGIC) - RINT_MAGIC, k);
}

static void quantize_slow(const float *x, size_t n, const quant *k, uint8_t *q) {
    for (size_t i = 0; i < n; i++) q[i] = quantize_one(rintf(x[i] * k->scale), k);
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
    if (fmaxf(fabsf(mn), fabsf(mx)) * k.scale <= RINT_MAGIC_LIMIT)
        quantize_fast(x, n, &k, o + HEADER_BYTES);
    else
        quantize_slow(x, n, &k, o + HEADER_BYTES);
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
    const uint8_t *q = p + HEADER_BYTES;
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK)
        for (int j = 0; j < BLOCK; j++) x[i + j] = ((float)q[i + j] + k.lb) / k.scale;
    for (; i < n; i++) x[i] = ((float)q[i] + k.lb) / k.scale;
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

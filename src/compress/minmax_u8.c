/* MinMaxUInt8 (compress.h has the formula and the wire format).
 *
 * Speed. The range scan, the quantization and the dequantization take the codec's
 * time; they run in the fastest version this processor has (minmax_u8_kernels.h:
 * AVX2, SSE2 or plain loops, all with the same bits). rint is done with the
 * 1.5 * 2^23 trick (exact round-half-even for |v| <= 2^22) because rintf is a
 * library call on baseline x86-64; chunks whose scaled values are larger take the
 * rintf loop below, with the same bits. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "compress/minmax_u8_kernels.h"

#define HEADER_BYTES (2 * sizeof(float))
#define RINT_MAGIC_LIMIT 4194304.0f /* 2^22 */

typedef struct minmax_codec {
    bp_codec base;
    const bp_minmax_kernels *k;
} minmax_codec;

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

/* Same clamp as the kernels' (minmax_u8_kernels.c), with the library's rintf. */
static void quantize_slow(const float *restrict x, size_t n, float scale, float ub, float lb,
                          uint8_t *restrict q) {
    for (size_t i = 0; i < n; i++) {
        float r = rintf(x[i] * scale);
        float v = (r < ub ? r : ub) - lb;
        v = v > 0.0f ? v : 0.0f;
        q[i] = (uint8_t)(v < 255.0f ? v : 255.0f);
    }
}

static size_t mm_encoded_size(const bp_codec *c, size_t n) {
    (void)c;
    return n ? HEADER_BYTES + n : 0;
}

/* The encoding of n zeros: a +0 range and n codes of zero, each the one the formula
 * gives. */
static void encode_zeros(const bp_minmax_kernels *kern, size_t n, unsigned char *o) {
    const float zero = 0.0f;
    quant k;
    quant_of(zero, zero, &k);
    memset(o, 0, HEADER_BYTES);
    kern->quantize(&zero, 1, k.scale, k.ub, k.lb, o + HEADER_BYTES);
    memset(o + HEADER_BYTES + 1, o[HEADER_BYTES], n - 1);
}

static bp_status mm_encode(bp_codec *c, const float *x, size_t n, void *out, bp_err *err) {
    const bp_minmax_kernels *kern = ((minmax_codec *)c)->k;
    if (n == 0) return BP_OK;
    if (bp_codec_on_device(c, 0, BP_MINMAX_ENCODE_BYTES * (double)n)) {
        encode_zeros(kern, n, out);
        return BP_OK;
    }
    float mn, mx;
    if (!kern->min_max(x, n, &mn, &mx)) return bp_codec_reject_nonfinite("minmax_u8", x, n, err);
    /* A zero range end is written as +0 whichever zero the scan met first, so that
     * every version (and order of scanning) writes the same header bytes. */
    mn += 0.0f;
    mx += 0.0f;
    quant k;
    if (!quant_of(mn, mx, &k))
        return bp_fail(err, BP_ENONFINITE,
                       "minmax_u8: chunk range [%g, %g] overflows float when scaled; not encoded",
                       (double)mn, (double)mx);
    unsigned char *o = out;
    memcpy(o, &mn, sizeof mn);
    memcpy(o + sizeof mn, &mx, sizeof mx);
    bool fast = fmaxf(fabsf(mn), fabsf(mx)) * k.scale <= RINT_MAGIC_LIMIT;
    (fast ? kern->quantize : quantize_slow)(x, n, k.scale, k.ub, k.lb, o + HEADER_BYTES);
    return BP_OK;
}

static bp_status mm_decode(const bp_codec *c, const void *in, size_t n, float *x, bp_err *err) {
    (void)err;
    if (n == 0) return BP_OK;
    if (bp_codec_on_device(c, 0, BP_MINMAX_DECODE_BYTES * (double)n)) {
        memset(x, 0, n * sizeof *x);
        return BP_OK;
    }
    const unsigned char *p = in;
    float mn, mx;
    memcpy(&mn, p, sizeof mn);
    memcpy(&mx, p + sizeof mn, sizeof mx);
    quant k;
    quant_of(mn, mx, &k);
    ((const minmax_codec *)c)->k->dequantize(p + HEADER_BYTES, n, k.scale, k.lb, x);
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

bp_status bp_codec_minmax_u8_new_isa(const char *isa, bp_codec **out, bp_err *err) {
    *out = NULL;
    const bp_minmax_kernels *k = isa ? bp_minmax_kernels_for(isa) : bp_minmax_kernels_best();
    if (!k) return bp_fail(err, BP_EUSAGE, "minmax_u8: no %s version on this machine", isa ? isa : "?");
    minmax_codec *c = malloc(sizeof *c);
    if (!c) return bp_fail(err, BP_ENOMEM, "minmax_u8: cannot allocate the codec");
    *c = (minmax_codec){.base = {.ops = &minmax_ops}, .k = k};
    *out = &c->base;
    return BP_OK;
}

bp_status bp_codec_minmax_u8_create(bp_codec **out, bp_err *err) {
    return bp_codec_minmax_u8_new_isa(NULL, out, err);
}

const char *bp_codec_minmax_u8_isa(const bp_codec *c) {
    return c->ops == &minmax_ops ? ((const minmax_codec *)c)->k->isa : NULL;
}

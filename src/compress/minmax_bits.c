/* MinMax with 4 or 2 bits per value (compress.h has the formula and the wire
 * format): MinMaxUInt8's rule with L = 2^bits - 1 levels, the codes packed.
 * Plain loops with the library's rintf: these codecs compress DiLoCo's outer
 * gradients, once every many steps, where MinMaxUInt8's vector kernels are not
 * worth their code. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"

#define HEADER_BYTES (2 * sizeof(float))

typedef struct bits_codec {
    bp_codec base;
    int bits;
} bits_codec;

static int bits_of(const bp_codec *c) { return ((const bits_codec *)c)->bits; }

static float levels_of(int bits) { return (float)((1 << bits) - 1); }

static size_t bits_encoded_size(const bp_codec *c, size_t n) {
    return n ? HEADER_BYTES + (n * (size_t)bits_of(c) + 7) / 8 : 0;
}

/* MinMaxUInt8's constants with L levels; false when they overflow float. */
static bool quant_of(float mn, float mx, float L, float *scale, float *lb) {
    float range = mx - mn;
    *scale = L / (range + 1e-7f);
    float ub = rintf(mx * *scale);
    *lb = ub - L;
    return isfinite(range) && isfinite(mn * *scale) && isfinite(ub);
}

/* The code of x, clamped to [0, L] as MinMaxUInt8's. */
static unsigned code_of(float x, float scale, float lb, float L) {
    float r = rintf(x * scale);
    float v = (r < lb + L ? r : lb + L) - lb;
    v = v > 0.0f ? v : 0.0f;
    return (unsigned)(v < L ? v : L);
}

/* The encoding of n zeros (on a device, codec.h): a +0 range and n codes of zero,
 * packed (8 / bits codes to a byte). */
static void encode_zeros(int bits, size_t n, unsigned char *o) {
    const float L = levels_of(bits);
    float scale, lb;
    quant_of(0.0f, 0.0f, L, &scale, &lb);
    unsigned code = code_of(0.0f, scale, lb, L), byte = 0;
    for (int k = 0; k < 8; k += bits) byte |= code << k;
    size_t nbits = n * (size_t)bits, full = nbits / 8;
    memset(o, 0, HEADER_BYTES);
    memset(o + HEADER_BYTES, (int)byte, full);
    if (nbits % 8) o[HEADER_BYTES + full] = (unsigned char)(byte & ((1u << nbits % 8) - 1));
}

static bp_status bits_encode(bp_codec *c, const float *x, size_t n, void *out, bp_err *err) {
    if (n == 0) return BP_OK;
    const int bits = bits_of(c);
    const float L = levels_of(bits);
    if (bp_codec_on_device(c, 0, BP_MINMAX_ENCODE_BYTES * (double)n)) {
        encode_zeros(bits, n, out);
        return BP_OK;
    }
    float mn = x[0], mx = x[0];
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return bp_codec_reject_nonfinite(c->ops->name, x, n, err);
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }
    mn += 0.0f; /* +0 for either zero, as MinMaxUInt8 writes it */
    mx += 0.0f;
    float scale, lb;
    if (!quant_of(mn, mx, L, &scale, &lb))
        return bp_fail(err, BP_ENONFINITE, "%s: chunk range [%g, %g] overflows float when scaled",
                       c->ops->name, (double)mn, (double)mx);
    unsigned char *o = out;
    memcpy(o, &mn, sizeof mn);
    memcpy(o + sizeof mn, &mx, sizeof mx);
    uint8_t *q = o + HEADER_BYTES;
    memset(q, 0, (n * (size_t)bits + 7) / 8);
    for (size_t i = 0; i < n; i++) {
        size_t bit = i * (size_t)bits;
        q[bit / 8] |= (uint8_t)(code_of(x[i], scale, lb, L) << (bit % 8));
    }
    return BP_OK;
}

static bp_status bits_decode(const bp_codec *c, const void *in, size_t n, float *x, bp_err *err) {
    (void)err;
    if (n == 0) return BP_OK;
    if (bp_codec_on_device(c, 0, BP_MINMAX_DECODE_BYTES * (double)n)) {
        memset(x, 0, n * sizeof *x);
        return BP_OK;
    }
    const int bits = bits_of(c);
    const unsigned char *p = in;
    float mn, mx, scale, lb;
    memcpy(&mn, p, sizeof mn);
    memcpy(&mx, p + sizeof mn, sizeof mx);
    quant_of(mn, mx, levels_of(bits), &scale, &lb);
    const uint8_t *q = p + HEADER_BYTES;
    const unsigned mask = (1u << bits) - 1;
    for (size_t i = 0; i < n; i++) {
        size_t bit = i * (size_t)bits;
        unsigned code = (q[bit / 8] >> (bit % 8)) & mask;
        x[i] = ((float)code + lb) / scale;
    }
    return BP_OK;
}

static void bits_destroy(bp_codec *c) { free(c); }

static const bp_codec_ops u4_ops = {
    .name = "minmax_u4",
    .encoded_size = bits_encoded_size,
    .encode = bits_encode,
    .decode = bits_decode,
    .destroy = bits_destroy,
};
static const bp_codec_ops u2_ops = {
    .name = "minmax_u2",
    .encoded_size = bits_encoded_size,
    .encode = bits_encode,
    .decode = bits_decode,
    .destroy = bits_destroy,
};

bp_status bp_codec_minmax_bits_create(int bits, bp_codec **out, bp_err *err) {
    *out = NULL;
    if (bits != 4 && bits != 2)
        return bp_fail(err, BP_EUSAGE, "minmax: %d bits per value; 4 or 2 are made", bits);
    bits_codec *c = malloc(sizeof *c);
    if (!c) return bp_fail(err, BP_ENOMEM, "minmax_u%d: cannot allocate the codec", bits);
    *c = (bits_codec){.base = {.ops = bits == 4 ? &u4_ops : &u2_ops}, .bits = bits};
    *out = &c->base;
    return BP_OK;
}

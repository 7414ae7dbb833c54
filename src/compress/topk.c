/* Top-k with 2-bit values (compress.h has the rule and the wire format). The k
 * largest magnitudes are found by sorting (|x| bits, index) keys: the bits of a
 * finite float's magnitude order like the magnitude, so the selection and its
 * ties are the same on every machine. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"

typedef struct topk_codec {
    bp_codec base;
    double fraction;
    bp_codec *values; /* MinMax with 2 bits */
    uint64_t *keys;   /* encode's scratch */
    uint32_t *idx;
    float *v;
    size_t cap;
} topk_codec;

static size_t k_of(const topk_codec *c, size_t n) {
    size_t k = (size_t)ceil(c->fraction * (double)n);
    return k < 1 ? 1 : k > n ? n : k;
}

static size_t topk_encoded_size(const bp_codec *c, size_t n) {
    const topk_codec *t = (const topk_codec *)c;
    if (n == 0) return 0;
    size_t k = k_of(t, n);
    return k * sizeof(uint32_t) + bp_codec_encoded_size(t->values, k);
}

static int by_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int by_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static bp_status reserve(topk_codec *t, size_t n, bp_err *err) {
    if (n <= t->cap) return BP_OK;
    free(t->keys), free(t->idx), free(t->v);
    t->keys = malloc(n * sizeof *t->keys);
    t->idx = malloc(n * sizeof *t->idx);
    t->v = malloc(n * sizeof *t->v);
    t->cap = t->keys && t->idx && t->v ? n : 0;
    return t->cap ? BP_OK : bp_fail(err, BP_ENOMEM, "topk_u2: no memory for %zu values", n);
}

static bp_status topk_encode(bp_codec *c, const float *x, size_t n, void *out, bp_err *err) {
    topk_codec *t = (topk_codec *)c;
    if (n == 0) return BP_OK;
    if (n > UINT32_MAX) return bp_fail(err, BP_EUSAGE, "topk_u2: %zu values exceed 2^32", n);
    bp_status rc = reserve(t, n, err);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return bp_codec_reject_nonfinite("topk_u2", x, n, err);
        uint32_t mag;
        float a = fabsf(x[i]);
        memcpy(&mag, &a, sizeof mag);
        t->keys[i] = ((uint64_t)(UINT32_MAX - mag) << 32) | (uint64_t)i; /* largest first */
    }
    qsort(t->keys, n, sizeof *t->keys, by_u64);
    size_t k = k_of(t, n);
    for (size_t j = 0; j < k; j++) t->idx[j] = (uint32_t)(t->keys[j] & UINT32_MAX);
    qsort(t->idx, k, sizeof *t->idx, by_u32);
    for (size_t j = 0; j < k; j++) t->v[j] = x[t->idx[j]];
    unsigned char *o = out;
    memcpy(o, t->idx, k * sizeof *t->idx);
    return bp_codec_encode(t->values, t->v, k, o + k * sizeof *t->idx, err);
}

static bp_status topk_decode(const bp_codec *c, const void *in, size_t n, float *x, bp_err *err) {
    const topk_codec *t = (const topk_codec *)c;
    if (n == 0) return BP_OK;
    size_t k = k_of(t, n);
    const unsigned char *p = in;
    bp_status rc = bp_codec_decode(t->values, p + k * sizeof(uint32_t), k, x, err);
    if (rc) return rc;
    /* The k values sit in x[0..k); move each to its index, from the last (index j
     * >= j, so no value is overwritten before it moved), zeroing the gaps. */
    size_t end = n;
    for (size_t j = k; j-- > 0;) {
        uint32_t at;
        memcpy(&at, p + j * sizeof at, sizeof at);
        float v = x[j];
        for (size_t i = (size_t)at + 1; i < end; i++) x[i] = 0.0f;
        x[at] = v;
        end = at;
    }
    for (size_t i = 0; i < end; i++) x[i] = 0.0f;
    return BP_OK;
}

static void topk_destroy(bp_codec *c) {
    topk_codec *t = (topk_codec *)c;
    bp_codec_destroy(t->values);
    free(t->keys), free(t->idx), free(t->v);
    free(t);
}

static const bp_codec_ops topk_ops = {
    .name = "topk_u2",
    .encoded_size = topk_encoded_size,
    .encode = topk_encode,
    .decode = topk_decode,
    .destroy = topk_destroy,
};

bp_status bp_codec_topk_create(double fraction, bp_codec **out, bp_err *err) {
    *out = NULL;
    if (!(fraction > 0 && fraction <= 1))
        return bp_fail(err, BP_EUSAGE, "topk_u2: fraction %g is not in (0, 1]", fraction);
    topk_codec *t = calloc(1, sizeof *t);
    if (!t) return bp_fail(err, BP_ENOMEM, "topk_u2: cannot allocate the codec");
    t->base.ops = &topk_ops;
    t->fraction = fraction;
    bp_status rc = bp_codec_minmax_bits_create(2, &t->values, err);
    if (rc) {
        free(t);
        return rc;
    }
    *out = &t->base;
    return BP_OK;
}

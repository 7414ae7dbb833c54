/* Short vectors for the elementwise loops of nn/ (private to nn/).
 *
 * The build uses -O2 for portable binaries, and at -O2 gcc vectorizes only loops
 * whose trip count is a known multiple of the vector width, never loops that call
 * libm. GCC/Clang vector extensions make the vector code explicit and portable
 * (SSE2 on x86-64, NEON on arm64) without intrinsics or extra compiler flags.
 * 16-byte vectors: wider ones change the calling convention without AVX and gcc
 * warns about it. A file whose functions are all compiled for AVX-512 (nn/avx512.h)
 * defines BP_VBYTES 64 before including this: every lane then runs the same
 * operations in the same order, so the results are bit for bit those of the
 * 16-byte loops.
 *
 * bp_vexp is a Cephes-style polynomial in the float build (within 1e-7 relative of
 * exp on [-87.3, 88], saturating at e^88 above and 0 below, NaN in NaN out), because
 * libm's expf is scalar and would take a large part of the GELU and softmax time.
 * The double build (gradient checks) calls libm's exp for each lane. */
#ifndef BP_NN_VEC_H
#define BP_NN_VEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nn/real.h"

#ifndef BP_VBYTES
#define BP_VBYTES 16
#endif
#define BP_VLEN (BP_VBYTES / sizeof(bp_real))

typedef bp_real bp_vec __attribute__((vector_size(BP_VBYTES)));
#ifdef BP_REAL_DOUBLE
typedef int64_t bp_ivec __attribute__((vector_size(BP_VBYTES)));
#else
typedef int32_t bp_ivec __attribute__((vector_size(BP_VBYTES)));
typedef uint32_t bp_uvec __attribute__((vector_size(BP_VBYTES)));
#endif

static inline bp_vec bp_vsplat(bp_real a) { return (bp_vec){0} + a; }
static inline bp_vec bp_vload(const bp_real *p) {
    bp_vec v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void bp_vstore(bp_real *p, bp_vec v) { memcpy(p, &v, sizeof v); }
/* The first n < BP_VLEN elements, zeros after. */
static inline bp_vec bp_vload_part(const bp_real *p, size_t n) {
    bp_vec v = {0};
    memcpy(&v, p, n * sizeof *p);
    return v;
}
static inline void bp_vstore_part(bp_real *p, bp_vec v, size_t n) { memcpy(p, &v, n * sizeof *p); }
/* mask ? a : b per lane; mask lanes are all ones or all zeros (a comparison). */
static inline bp_vec bp_vselect(bp_ivec mask, bp_vec a, bp_vec b) {
    return (bp_vec)((mask & (bp_ivec)a) | (~mask & (bp_ivec)b));
}
static inline bp_real bp_vsum(bp_vec v) {
    bp_real s = 0;
    for (size_t i = 0; i < BP_VLEN; i++) s += v[i];
    return s;
}

#ifdef BP_REAL_DOUBLE
static inline bp_vec bp_vexp(bp_vec x) {
    for (size_t i = 0; i < BP_VLEN; i++) x[i] = exp(x[i]);
    return x;
}
#else
static inline bp_vec bp_vexp(bp_vec x) {
    /* Comparisons written so that NaN lanes fall through and stay NaN. */
    x = bp_vselect(x > bp_vsplat(88.0f), bp_vsplat(88.0f), x);
    /* Round x / ln 2 to the nearest integer n: adding 1.5 * 2^23 leaves n in the low
     * mantissa bits of t (no float-to-int conversion, which is undefined for NaN). */
    bp_vec t = x * 1.44269504088896341f + 12582912.0f;
    bp_vec n = t - 12582912.0f;
    bp_vec r = x - n * 0.693359375f + n * 2.12194440e-4f; /* x - n ln 2 in two parts */
    bp_vec p = bp_vsplat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    bp_uvec pow2n = ((bp_uvec)t - 0x4B400000u + 127u) << 23; /* 2^n as float bits */
    return bp_vselect(x < bp_vsplat(-87.33654f), bp_vsplat(0.0f), p * (bp_vec)pow2n);
}
#endif

/* y[i] = scale * exp(x[i] - shift) for i < n (y may be x; NULL stores nothing);
 * returns the sum of exp(x[i] - shift). The softmax kernel of attention and
 * cross-entropy. */
static inline bp_real bp_vexp_shift(bp_real *y, const bp_real *x, size_t n, bp_real shift,
                                    bp_real scale) {
    bp_vec sum = {0}, sh = bp_vsplat(shift);
    size_t i = 0;
    for (; i + BP_VLEN <= n; i += BP_VLEN) {
        bp_vec e = bp_vexp(bp_vload(x + i) - sh);
        sum += e;
        if (y) bp_vstore(y + i, e * scale);
    }
    if (i < n) {
        bp_vec e = bp_vexp(bp_vload_part(x + i, n - i) - sh);
        for (size_t k = n - i; k < BP_VLEN; k++) e[k] = 0;
        sum += e;
        if (y) bp_vstore_part(y + i, e * scale, n - i);
    }
    return bp_vsum(sum);
}

/* y[i] += x[i] for i < n. */
static inline void bp_vacc(bp_real *y, const bp_real *x, size_t n) {
    size_t i = 0;
    for (; i + BP_VLEN <= n; i += BP_VLEN) bp_vstore(y + i, bp_vload(y + i) + bp_vload(x + i));
    for (; i < n; i++) y[i] += x[i];
}

/* The largest of x[0..n), n >= 1. */
static inline bp_real bp_vmax(const bp_real *x, size_t n) {
    bp_real mx = x[0];
    size_t i = 0;
    if (n >= BP_VLEN) {
        bp_vec m = bp_vload(x);
        for (i = BP_VLEN; i + BP_VLEN <= n; i += BP_VLEN) {
            bp_vec v = bp_vload(x + i);
            m = bp_vselect(v > m, v, m);
        }
        for (size_t k = 0; k < BP_VLEN; k++) mx = m[k] > mx ? m[k] : mx;
    }
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

/* x[i] *= a for i < n. */
static inline void bp_vscale(bp_real *x, size_t n, bp_real a) {
    size_t i = 0;
    for (; i + BP_VLEN <= n; i += BP_VLEN) bp_vstore(x + i, bp_vload(x + i) * a);
    for (; i < n; i++) x[i] *= a;
}

#endif

#include "core/update_avx512.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))

bool bp_update_avx512(void) { return __builtin_cpu_supports("avx512f"); }

AVX512 void bp_adamw_avx512(const bp_adamw_consts *k, float *p, const float *g, float *m, float *v,
                            size_t off, size_t len) {
    const __m512 b1 = _mm512_set1_ps(k->b1), b2 = _mm512_set1_ps(k->b2);
    const __m512 c1 = _mm512_set1_ps(1 - k->b1), c2 = _mm512_set1_ps(1 - k->b2);
    const __m512 decay = _mm512_set1_ps(k->decay), step = _mm512_set1_ps(k->step);
    const __m512 inv = _mm512_set1_ps(k->inv_sqrt_bc2), eps = _mm512_set1_ps(k->eps);
    size_t i = off, end = off + len;
    for (; i < end; i += 16) {
        /* The last vector takes the lanes that remain: masked loads read nothing past end. */
        __mmask16 in = end - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (end - i)) - 1);
        __m512 gi = _mm512_maskz_loadu_ps(in, g + i);
        /* m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g */
        __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_maskz_loadu_ps(in, m + i)),
                                  _mm512_mul_ps(c1, gi));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_maskz_loadu_ps(in, v + i)),
                                  _mm512_mul_ps(_mm512_mul_ps(c2, gi), gi));
        /* p = p decay - step m / (sqrt(v) / sqrt(bc2) + eps) */
        __m512 den = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), inv), eps);
        __m512 pi = _mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(in, p + i), decay),
                                  _mm512_div_ps(_mm512_mul_ps(step, mi), den));
        _mm512_mask_storeu_ps(m + i, in, mi);
        _mm512_mask_storeu_ps(v + i, in, vi);
        _mm512_mask_storeu_ps(p + i, in, pi);
    }
}
#else
bool bp_update_avx512(void) { return false; }
void bp_adamw_avx512(const bp_adamw_consts *k, float *p, const float *g, float *m, float *v,
                     size_t off, size_t len) {
    (void)k, (void)p, (void)g, (void)m, (void)v, (void)off, (void)len;
}
#endif

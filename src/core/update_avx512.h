/* AdamW's update (core/backend_cpu.c) on 16 floats at a time, for CPUs with
 * AVX-512F: each element goes through the float operations of the plain loop in
 * the same order (no contraction into FMA), so the bits are the same. */
#ifndef BP_CORE_UPDATE_AVX512_H
#define BP_CORE_UPDATE_AVX512_H

#include <stdbool.h>
#include <stddef.h>

/* The constants as backend_cpu.c's adamw computes them. */
typedef struct bp_adamw_consts {
    float b1, b2, decay, step, inv_sqrt_bc2, eps;
} bp_adamw_consts;

/* Whether this build and CPU run bp_adamw_avx512. */
bool bp_update_avx512(void);
/* Elements [off, off + len): m, v, p updated from g, as the plain loop. */
void bp_adamw_avx512(const bp_adamw_consts *k, float *p, const float *g, float *m, float *v,
                     size_t off, size_t len);

#endif

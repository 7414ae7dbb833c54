/* Seeded random numbers that make runs reproducible.
 *
 * xoshiro256** seeded through splitmix64. The whole state is four integers, so it
 * can be saved in a checkpoint and restored to continue the exact same sequence,
 * and independent streams (per rank, per purpose) are derived from one seed with
 * bp_rng_seed(seed, stream). */
#ifndef BP_CORE_RNG_H
#define BP_CORE_RNG_H

#include <stdint.h>

typedef struct bp_rng {
    uint64_t s[4];
} bp_rng;

/* A generator for (seed, stream); different streams give unrelated sequences. */
void bp_rng_seed(bp_rng *r, uint64_t seed, uint64_t stream);
uint64_t bp_rng_u64(bp_rng *r);
/* Uniform in [0, n) without modulo bias; n must be > 0. */
uint64_t bp_rng_below(bp_rng *r, uint64_t n);
/* Uniform double in [0, 1) with 53 random bits. */
double bp_rng_uniform(bp_rng *r);
/* Standard normal (Box-Muller, one value per call so the state alone defines it). */
double bp_rng_normal(bp_rng *r);

#endif

/* The algorithms of registry.h as an enum, and the block that holds every
 * algorithm's own settings: one slot of BP_DP_SETTINGS_BYTES per algorithm (the
 * features' among them), its layout known only to the algorithm's file and, where
 * others read them, its header. The option group in an algorithm's ops
 * (parallel/dp/algo.h) sets its slot, so an algorithm with options of its own is
 * still one file and one line of registry.h. */
#ifndef BP_PARALLEL_DP_SETTINGS_H
#define BP_PARALLEL_DP_SETTINGS_H

#include <stddef.h>

#include "parallel/dp/registry.h"

#define BP_DP_ENUM(id, name, ops) BP_DP_##id,
typedef enum bp_dp_algo {
    BP_DP_ALGOS(BP_DP_ENUM)
    BP_DP_FEATURE_ALGOS(BP_DP_ENUM)
} bp_dp_algo;
#undef BP_DP_ENUM

/* The number of --dp-algo's choices, which come first in bp_dp_algo, and of all. */
#define BP_DP_COUNT(id, name, ops) +1
enum { BP_DP_N_CHOICES = 0 BP_DP_ALGOS(BP_DP_COUNT),
       BP_DP_N_ALGOS = BP_DP_N_CHOICES BP_DP_FEATURE_ALGOS(BP_DP_COUNT) };
#undef BP_DP_COUNT

/* The bytes of one algorithm's settings at most. */
#define BP_DP_SETTINGS_BYTES 64

typedef struct bp_dp_settings {
    _Alignas(max_align_t) unsigned char of[BP_DP_N_ALGOS][BP_DP_SETTINGS_BYTES];
} bp_dp_settings;

/* Algorithm a's slot. */
static inline const void *bp_dp_settings_of(const bp_dp_settings *s, bp_dp_algo a) {
    return s->of[a];
}
static inline void *bp_dp_settings_at(bp_dp_settings *s, bp_dp_algo a) { return s->of[a]; }

/* Typed access to algorithm ID's slot, holding a T, for the algorithm's file and its
 * header: bp_<name>_of (read) and bp_<name>_in (write). */
#define BP_DP_SETTINGS(name, ID, T)                                                            \
    _Static_assert(sizeof(T) <= BP_DP_SETTINGS_BYTES, #T " exceeds BP_DP_SETTINGS_BYTES");     \
    _Static_assert(_Alignof(T) <= _Alignof(max_align_t), #T " is over-aligned for its slot"); \
    static inline const T *bp_##name##_of(const bp_dp_settings *s) {                           \
        return (const T *)bp_dp_settings_of(s, BP_DP_##ID);                                    \
    }                                                                                          \
    static inline T *bp_##name##_in(bp_dp_settings *s) {                                       \
        return (T *)bp_dp_settings_at(s, BP_DP_##ID);                                          \
    }

#endif

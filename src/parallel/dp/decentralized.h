/* decentralized's settings (--peers, --interval, --decentralized-order), set by the
 * options that decentralized.c declares; lp-decentralized shares the interval. */
#ifndef BP_PARALLEL_DP_DECENTRALIZED_H
#define BP_PARALLEL_DP_DECENTRALIZED_H

#include <stdint.h>

#include "bagpipe/comm.h"
#include "parallel/dp/settings.h"

/* Bagua's order exchanges x_t during forward and backward and steps from the
 * average; step-first steps, then averages the stepped weights (exposed). */
typedef enum bp_decentralized_order {
    BP_DECENTRALIZED_BAGUA,
    BP_DECENTRALIZED_STEP_FIRST
} bp_decentralized_order;

typedef struct bp_decentralized_settings {
    bp_peers peers;   /* whom a rank averages with */
    int64_t interval; /* steps between weight averagings */
    bp_decentralized_order order;
} bp_decentralized_settings;

BP_DP_SETTINGS(decentralized, DECENTRALIZED, bp_decentralized_settings)

#endif

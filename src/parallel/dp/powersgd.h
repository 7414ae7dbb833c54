/* powersgd's settings (--rank, --powersgd-warmup), set by the options that
 * powersgd.c declares; Optimus-CC's selective stage compression sets them too. */
#ifndef BP_PARALLEL_DP_POWERSGD_H
#define BP_PARALLEL_DP_POWERSGD_H

#include <stdbool.h>
#include <stdint.h>

#include "parallel/dp/settings.h"

typedef struct bp_powersgd_settings {
    int rank;       /* of the approximation */
    int64_t warmup; /* steps of plain allreduce first */
    /* A matrix is compressed only if (rows + cols) r * min_rate < rows cols
     * (PyTorch's min_compression_rate, 2; 0 compresses every matrix, as Optimus-CC),
     * and orth_q orthonormalizes Q before each use (PyTorch's hook; not Optimus-CC).
     * No option sets them. */
    double min_rate;
    bool orth_q;
} bp_powersgd_settings;

BP_DP_SETTINGS(powersgd, POWERSGD, bp_powersgd_settings)

#endif

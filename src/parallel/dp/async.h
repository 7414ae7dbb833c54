/* async's settings (--sync-ms, --async-warmup), set by the options that async.c
 * declares. */
#ifndef BP_PARALLEL_DP_ASYNC_H
#define BP_PARALLEL_DP_ASYNC_H

#include <stdint.h>

#include "parallel/dp/settings.h"

typedef struct bp_async_settings {
    int sync_ms;    /* milliseconds between averagings */
    int64_t warmup; /* steps of gradient allreduce before the averaging starts */
    int64_t agree_every; /* steps between the ranks' agreements after the warm-up */
} bp_async_settings;

BP_DP_SETTINGS(async, ASYNC, bp_async_settings)

#endif

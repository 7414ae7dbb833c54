/* qadam's settings (--qadam-warmup), set by the option that qadam.c declares. */
#ifndef BP_PARALLEL_DP_QADAM_H
#define BP_PARALLEL_DP_QADAM_H

#include <stdint.h>

#include "parallel/dp/settings.h"

typedef struct bp_qadam_settings {
    int64_t warmup; /* steps of AdamW on averaged gradients before compression */
} bp_qadam_settings;

BP_DP_SETTINGS(qadam, QADAM, bp_qadam_settings)

#endif

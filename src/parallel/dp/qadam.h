/* qadam's settings (--qadam-warmup), set by the option that qadam.c declares. */
#ifndef BP_PARALLEL_DP_QADAM_H
#define BP_PARALLEL_DP_QADAM_H

#include <stdint.h>

#include "core/options.h"

typedef struct bp_qadam_settings {
    int64_t warmup; /* steps of AdamW on averaged gradients before compression */
} bp_qadam_settings;

extern const bp_option_group bp_qadam_options;

#endif

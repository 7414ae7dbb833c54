/* Elastic averaging's settings (--ea-alpha, --ea-period), set by the options that
 * easgd.c declares; AvgPipe's averaging of its pipelines reads them too. */
#ifndef BP_PARALLEL_DP_EASGD_H
#define BP_PARALLEL_DP_EASGD_H

#include <stdint.h>

#include "core/options.h"

typedef struct bp_easgd_settings {
    double alpha;   /* elastic coefficient; below 0: bp_dp_ea_default_alpha */
    int64_t period; /* steps between elastic averagings (tau) */
} bp_easgd_settings;

extern const bp_option_group bp_easgd_options;

#endif

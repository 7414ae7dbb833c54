/* Elastic averaging's settings (--ea-alpha, --ea-period), set by the options that
 * easgd.c declares; AvgPipe's averaging of its pipelines reads them too. */
#ifndef BP_PARALLEL_DP_EASGD_H
#define BP_PARALLEL_DP_EASGD_H

#include <stdint.h>

#include "parallel/dp/settings.h"

typedef struct bp_easgd_settings {
    double alpha;   /* elastic coefficient; below 0: bp_dp_ea_default_alpha */
    int64_t period; /* steps between elastic averagings (tau) */
} bp_easgd_settings;

BP_DP_SETTINGS(easgd, EASGD, bp_easgd_settings)

#endif

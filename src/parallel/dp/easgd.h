/* Elastic averaging's settings (--ea-alpha, --ea-period), set by the options that
 * easgd.c declares; AvgPipe's averaging of its pipelines reads them too. */
#ifndef BP_PARALLEL_DP_EASGD_H
#define BP_PARALLEL_DP_EASGD_H

#include <stddef.h>
#include <stdint.h>

#include "bagpipe/comm.h"
#include "core/backend.h"
#include "parallel/dp/settings.h"

typedef struct bp_easgd_settings {
    double alpha;   /* elastic coefficient; below 0: bp_dp_ea_default_alpha */
    int64_t period; /* steps between elastic averagings (tau) */
} bp_easgd_settings;

BP_DP_SETTINGS(easgd, EASGD, bp_easgd_settings)

/* One elastic averaging of the n weights w with the center (collective over comm):
 * D = alpha (w - C); w -= D; C += sum_r D, diff holding the D's (n floats). The
 * engine's easgd runs it every period, and so does bagpipe.torch's EASGD. */
bp_status bp_dp_easgd_average(const bp_backend *be, bp_comm *comm, float *w, float *center,
                              float *diff, size_t n, double alpha, bp_err *err);

#endif

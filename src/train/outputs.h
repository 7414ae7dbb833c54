/* The files a run writes at paths the user names (--metrics, --trace), checked
 * before training (outputs.c). */
#ifndef BP_TRAIN_OUTPUTS_H
#define BP_TRAIN_OUTPUTS_H

#include <stdbool.h>

#include "bagpipe/status.h"
#include "train/config.h"

/* Rank 0, before training, once --out is claimed: --metrics and --trace may be
 * written where they point (bp_check_output), not onto each other or onto
 * `latest`, and a new run (not `resuming`) truncates another run's metrics log
 * only with --overwrite. BP_EUSAGE naming the option otherwise. */
bp_status bp_train_check_outputs(const bp_train_config *c, bool resuming, bp_err *err);

#endif

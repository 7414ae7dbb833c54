/* Fault injection, for tests (--fault-*): at step at_step (1-based; -1: never) the
 * given rank kills itself (SIGKILL), hangs, produces a NaN loss, or has a NaN weight.
 * The trainer injects them (train/trainer.c); the options are declared in faults.c. */
#ifndef BP_TRAIN_FAULTS_H
#define BP_TRAIN_FAULTS_H

#include <stdint.h>

#include "core/options.h"

typedef struct bp_fault_settings {
    int kill_rank, hang_rank, nan_rank, nan_weights_rank; /* -1: none */
    int64_t at_step;
} bp_fault_settings;

extern const bp_option_group bp_fault_options;

#endif

/* Learning-rate schedules.
 *
 * constant: lr every step.
 * cosine:   linear warm-up from lr/warmup to lr over `warmup` steps, then cosine
 *           decay from lr to min_lr at the last step. */
#ifndef BP_NN_LR_H
#define BP_NN_LR_H

#include <stdint.h>

typedef enum bp_lr_kind { BP_LR_CONSTANT, BP_LR_COSINE } bp_lr_kind;

typedef struct bp_lr_schedule {
    bp_lr_kind kind;
    double lr;
    double min_lr;
    int64_t warmup;
    int64_t total; /* steps of the whole run */
} bp_lr_schedule;

/* Learning rate for 0-based step `step`; a pure function of the step, so a resumed
 * run follows the same schedule. */
double bp_lr_at(const bp_lr_schedule *s, int64_t step);

#endif

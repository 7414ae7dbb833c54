/* The optimizer and its learning-rate schedule (--optim, --lr-schedule, --lr,
 * --min-lr-ratio, --warmup, --beta1, --beta2, --eps, --momentum, --weight-decay),
 * set by the options declared in optim_options.c.
 *
 * The defaults that depend on the model (kind, lr_schedule, lr) and on the
 * data-parallel algorithm (beta2) are left unset (-1) here; the command that composes
 * the options fills them (train/config.c) and its --help states both. */
#ifndef BP_NN_OPTIM_OPTIONS_H
#define BP_NN_OPTIM_OPTIONS_H

#include <stdint.h>

#include "bagpipe/status.h"
#include "core/options.h"
#include "nn/lr.h"
#include "nn/optim.h"

typedef struct bp_optim_settings {
    int kind;        /* a bp_optim_kind; -1: the model's */
    int lr_schedule; /* a bp_lr_kind; -1: the model's */
    double lr;       /* -1: the model's */
    double min_lr_ratio;
    int64_t warmup;
    double beta1, beta2, eps; /* adamw; beta2 -1: by the data-parallel algorithm */
    double momentum;          /* sgd */
    double weight_decay;
} bp_optim_settings;

extern const bp_option_group bp_optim_options;

/* The optimizer and the schedule over a run of `total` steps these settings describe
 * (once their defaults are filled). */
void bp_optim_settings_config(const bp_optim_settings *s, bp_optim_config *o);
void bp_optim_settings_schedule(const bp_optim_settings *s, int64_t total, bp_lr_schedule *l);
/* The combinations the ranges of the options do not catch, over a run of `total`
 * steps; the message names the option. */
bp_status bp_optim_settings_check(const bp_optim_settings *s, int64_t total, bp_err *err);

#endif

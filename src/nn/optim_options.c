#include "nn/optim_options.h"

#include <string.h>

#define S bp_optim_settings
static const bp_option options[] = {
    BP_OPT_CHOOSE(S, "optim", kind, "sgd|adamw", "optimizer", "adamw for gpt, sgd for mlp"),
    BP_OPT_CHOOSE(S, "lr-schedule", lr_schedule, "constant|cosine",
                  "constant, or linear warm-up then cosine decay to --min-lr-ratio x --lr",
                  "constant for gpt, cosine for mlp"),
    {"lr", BP_OPT_DOUBLE, offsetof(S, lr), 0, NULL, 0, 1e6, "X", "learning rate",
     "0.001 for gpt, 0.05 for mlp"},
    BP_OPT_NUM(S, "min-lr-ratio", BP_OPT_DOUBLE, min_lr_ratio, 0, 1, "X", "cosine: final lr / --lr"),
    BP_OPT_NUM(S, "warmup", BP_OPT_INT64, warmup, 0, 1e12, "N", "cosine: warm-up steps"),
    BP_OPT_NUM(S, "beta1", BP_OPT_DOUBLE, beta1, 0, 0.999999, "X", "adamw: first-moment decay"),
    {"beta2", BP_OPT_DOUBLE, offsetof(S, beta2), 0, NULL, 0, 0.999999, "X",
     "adamw: second-moment decay", "0.95; 0.999 with --dp-algo qadam, Bagua's QAdam default"},
    BP_OPT_NUM(S, "eps", BP_OPT_DOUBLE, eps, 1e-30, 1, "X",
               "adamw: epsilon (above 0: a zero second moment divides by it)"),
    BP_OPT_NUM(S, "momentum", BP_OPT_DOUBLE, momentum, 0, 0.999999, "X", "sgd: momentum"),
    BP_OPT_NUM(S, "weight-decay", BP_OPT_DOUBLE, weight_decay, 0, 1e3, "X", "weight decay"),
};
#undef S
static const bp_optim_settings defaults = {
    .kind = -1,
    .lr_schedule = -1,
    .lr = -1,
    .min_lr_ratio = 0.1,
    .warmup = 0,
    .beta1 = 0.9,
    .beta2 = -1,
    .eps = 1e-8,
    .momentum = 0.9,
    .weight_decay = 0,
};
const bp_option_group bp_optim_options = BP_OPTION_GROUP(options, defaults);

void bp_optim_settings_config(const bp_optim_settings *s, bp_optim_config *o) {
    memset(o, 0, sizeof *o);
    o->kind = (bp_optim_kind)s->kind;
    o->momentum = s->momentum;
    o->beta1 = s->beta1;
    o->beta2 = s->beta2;
    o->eps = s->eps;
    o->weight_decay = s->weight_decay;
}

void bp_optim_settings_schedule(const bp_optim_settings *s, int64_t total, bp_lr_schedule *l) {
    l->kind = (bp_lr_kind)s->lr_schedule;
    l->lr = s->lr;
    l->min_lr = s->lr * s->min_lr_ratio;
    l->warmup = s->warmup;
    l->total = total;
}

bp_status bp_optim_settings_check(const bp_optim_settings *s, int64_t total, bp_err *err) {
    if (s->lr_schedule == BP_LR_COSINE && s->warmup >= total)
        return bp_fail(err, BP_EUSAGE, "option --warmup: %lld must be below --steps %lld",
                       (long long)s->warmup, (long long)total);
    return BP_OK;
}

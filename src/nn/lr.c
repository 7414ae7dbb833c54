#include "nn/lr.h"

#include <math.h>

double bp_lr_at(const bp_lr_schedule *s, int64_t step) {
    if (s->kind == BP_LR_CONSTANT) return s->lr;
    if (step < s->warmup) return s->lr * (double)(step + 1) / (double)s->warmup;
    int64_t decay_steps = s->total - s->warmup;
    if (decay_steps <= 1) return s->lr;
    double progress = (double)(step - s->warmup) / (double)(decay_steps - 1);
    if (progress > 1) progress = 1;
    return s->min_lr + 0.5 * (s->lr - s->min_lr) * (1.0 + cos(M_PI * progress));
}

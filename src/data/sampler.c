#include "data/sampler.h"

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

static void shuffle_epoch(bp_epoch_sampler *s) {
    bp_rng r;
    bp_rng_seed(&r, s->seed, (uint64_t)s->epoch);
    for (int i = 0; i < s->n; i++) s->perm[i] = i;
    for (int i = s->n - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)bp_rng_below(&r, (uint64_t)i + 1);
        int t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
}

bp_status bp_epoch_sampler_init(bp_epoch_sampler *s, int n, uint64_t seed, bp_err *err) {
    memset(s, 0, sizeof *s);
    s->perm = malloc((size_t)n * sizeof *s->perm);
    if (!s->perm) return bp_fail(err, BP_ENOMEM, "cannot allocate a permutation of %d items", n);
    s->seed = seed;
    s->n = n;
    shuffle_epoch(s);
    return BP_OK;
}

void bp_epoch_sampler_free(bp_epoch_sampler *s) {
    free(s->perm);
    memset(s, 0, sizeof *s);
}

void bp_epoch_sampler_seek(bp_epoch_sampler *s, int64_t epoch, int pos) {
    s->epoch = epoch;
    s->pos = pos;
    shuffle_epoch(s);
}

bp_status bp_epoch_sampler_restore(bp_epoch_sampler *s, int64_t epoch, int64_t pos, bp_err *err) {
    if (epoch < 0 || epoch > INT64_MAX / 2)
        return bp_fail(err, BP_EFORMAT, "field epoch is %lld, out of range", (long long)epoch);
    if (pos < 0 || pos > s->n)
        return bp_fail(err, BP_EFORMAT, "field pos is %lld, outside the %d items", (long long)pos,
                       s->n);
    bp_epoch_sampler_seek(s, epoch, (int)pos);
    return BP_OK;
}

void bp_epoch_sampler_next(bp_epoch_sampler *s, int B_global, int rank, int world, int *idx) {
    if (s->pos + B_global > s->n) bp_epoch_sampler_seek(s, s->epoch + 1, 0);
    int per_rank = B_global / world;
    memcpy(idx, s->perm + s->pos + rank * per_rank, (size_t)per_rank * sizeof *idx);
    s->pos += B_global;
}

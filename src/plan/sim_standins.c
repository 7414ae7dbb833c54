#include "plan/sim_standins.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "parallel/partition.h"

enum { MAX_STANDINS = 64, MAX_REPLICAS = 64 };

typedef struct standin {
    pthread_t th;
    bp_range_bench *rb[MAX_REPLICAS];
    int n_rb;
    bool running;
    atomic_int *stop;
} standin;

struct bp_sim_standins {
    standin s[MAX_STANDINS];
    int n;
    atomic_int stop;
};

static void *run(void *arg) {
    standin *s = arg;
    bp_err ignored;
    for (int j = 0; !atomic_load_explicit(s->stop, memory_order_relaxed); j = (j + 1) % s->n_rb)
        if (bp_range_bench_pass(s->rb[j], NULL, &ignored) != BP_OK) break;
    return NULL;
}

void bp_sim_standins_stop(bp_sim_standins *ss) {
    if (!ss) return;
    atomic_store(&ss->stop, 1);
    for (int i = 0; i < ss->n; i++) {
        if (ss->s[i].running) pthread_join(ss->s[i].th, NULL);
        for (int j = 0; j < ss->s[i].n_rb; j++) bp_range_bench_destroy(ss->s[i].rb[j]);
    }
    free(ss);
}

static bp_status start_one(bp_sim_standins *ss, const bp_model_config *mc, int blocks, int tp,
                           int replicas, int micro_B, int T, bp_err *err) {
    standin *s = &ss->s[ss->n++];
    s->stop = &ss->stop;
    for (; s->n_rb < replicas && s->n_rb < MAX_REPLICAS; s->n_rb++) {
        bp_status rc = bp_range_bench_create_tp(mc, 0, blocks, tp, micro_B, T, &s->rb[s->n_rb], err);
        if (rc) return rc;
    }
    if (pthread_create(&s->th, NULL, run, s))
        return bp_fail(err, BP_ENOMEM, "cannot start a profiling thread");
    s->running = true;
    return BP_OK;
}

bp_status bp_sim_standins_start(int n, const bp_model_config *mc, int blocks, int tp, int replicas,
                                int micro_B, int T, bp_sim_standins **out, bp_err *err) {
    *out = NULL;
    if (n <= 0) return BP_OK;
    bp_sim_standins *ss = calloc(1, sizeof *ss);
    if (!ss) return bp_fail(err, BP_ENOMEM, "out of memory");
    atomic_init(&ss->stop, 0);
    bp_status rc = BP_OK;
    while (rc == BP_OK && ss->n < n && ss->n < MAX_STANDINS)
        rc = start_one(ss, mc, blocks, tp, replicas > 0 ? replicas : 1, micro_B, T, err);
    if (rc) {
        bp_sim_standins_stop(ss);
        return rc;
    }
    *out = ss;
    return BP_OK;
}

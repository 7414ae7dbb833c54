#include "train/tune.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/blas.h"
#include "core/buf.h"
#include "core/timer.h"
#include "nn/optim.h"
#include "parallel/partition.h"
#include "parallel/simulate.h"

/* Micro-batch counts beyond this only add per-operation overhead. */
enum { MAX_MICRO = 32, TIMING_RUNS = 5, STAGE_RUNS = 3 };

#define OFF(f) offsetof(bp_tune_config, f)
static const bp_option tune_options[] = {
    {"mem-cap", BP_OPT_DOUBLE, OFF(mem_cap_mb), 0, NULL, 0, 1e12, "MB",
     "memory per rank the chosen candidate must fit in (parameters, gradients, optimizer state "
     "and workspace of every replica, plus stashed activations)",
     "no cap"},
    {"top", BP_OPT_INT, OFF(top), 0, NULL, 0, 1 << 20, "N", "print only the N fastest candidates",
     "all"},
    {"msg-us", BP_OPT_DOUBLE, OFF(msg_us), 0, NULL, 0, 1e9, "US",
     "without --net: fixed cost of one message between ranks, in microseconds", NULL},
    {"load", BP_OPT_DOUBLE, OFF(load), 0, NULL, 1, 1e6, "X",
     "predict for computation X times slower than its CPU time (1: cores free) instead of the "
     "slowdown measured now",
     "measured"},
    {"wake-ms", BP_OPT_DOUBLE, OFF(wake_ms), 0, NULL, 0, 1e6, "MS",
     "predict for ranks that run again this long after a message they waited for arrived, "
     "instead of the delay measured now",
     "measured"},
    {"busy-threads", BP_OPT_INT, OFF(busy_threads), 0, NULL, 0, 64, "N",
     "threads computing alongside the profile, standing for the job's other ranks on this "
     "machine",
     "ranks - 1"},
};
#undef OFF

/* Options of the train command that tune chooses itself or that only tune has: the
 * suggested command line gets them from the chosen candidate, not from argv. */
static const char *const chosen_options[] = {
    "pipelines", "micro-batches", "schedule", "partition",    "mem-cap",
    "top",       "msg-us",        "load",     "wake-ms",      "busy-threads"};

bp_option *bp_tune_options(int *n) {
    int n_train, n_tune = (int)(sizeof tune_options / sizeof tune_options[0]);
    const bp_option *train = bp_train_options(&n_train);
    bp_option *all = malloc((size_t)(n_train + n_tune) * sizeof *all);
    if (!all) return NULL;
    memcpy(all, train, (size_t)n_train * sizeof *all);
    memcpy(all + n_train, tune_options, (size_t)n_tune * sizeof *all);
    *n = n_train + n_tune;
    return all;
}

void bp_tune_config_defaults(bp_tune_config *c, int for_help) {
    memset(c, 0, sizeof *c);
    bp_train_config_defaults(&c->train);
    /* Open MPI's shared-memory latency plus comm/'s bookkeeping, on cores that are
     * free; the scheduler's delay on a loaded machine is measured apart. */
    c->msg_us = 10;
    c->busy_threads = -1;
    c->wake_ms = -1;
    if (for_help) return;
    c->train.micro_batches = 0; /* 0, "" and pipelines 0: search */
    c->train.pipe_schedule[0] = '\0';
}

static int data_ranks(const bp_train_config *t) { return t->dp > 0 ? t->dp : 1; }

int bp_tune_config_finalize(bp_tune_config *c, bp_err *err) {
    int rc = bp_train_config_finalize(&c->train, err);
    if (rc) return rc;
    if (c->train.tp > 1) /* its stages would be timed whole and its command lack the tp ranks */
        return bp_fail(err, BP_EUSAGE,
                       "option --tp: tune does not model tensor parallelism; tune with --tp 1 and "
                       "add --tp to the suggested command (with tp times the ranks)");
    bp_train_config probe = c->train;
    if (!probe.micro_batches) probe.micro_batches = 1;
    if (!probe.pipe_schedule[0]) snprintf(probe.pipe_schedule, sizeof probe.pipe_schedule, "1f1b");
    probe.dp = data_ranks(&probe);
    rc = bp_train_config_check_world(&probe, probe.dp * probe.pp, err);
    c->train.dp = probe.dp;
    return rc;
}

/* ---- profile -------------------------------------------------------------------- */

/* One micro-batch size: the stages cut from its blocks' times as the trainer would
 * cut them (or --partition). */
typedef struct size_profile {
    int micro_B;
    int *first; /* [S+1] */
} size_profile;

/* N replicas per stage rank at one micro-batch size: each stage timed whole, its
 * replicas' passes taking turns as AvgPipe's interleaved stream makes them (each
 * replica's weights are colder in the caches than one model's). */
typedef struct setup {
    int N, size;         /* size: index into the size profiles */
    bp_sim_stage *stage; /* [S]: CPU times; update_s is one replica's */
    size_t *param_bytes; /* [S]: one replica's */
} setup;

typedef struct candidate {
    int N, M, setup;  /* setup: index into the setups */
    bool avgpipe;     /* --pipelines given (also for N = 1) */
    bp_schedule sched;
    bp_sim_result r;   /* under the machine's load while profiling */
    double unloaded_s; /* step time on an otherwise idle machine */
} candidate;

typedef struct tuner {
    const bp_tune_config *c;
    bp_model_config mc;
    int S, dp, W, T, n_blocks;
    size_profile *sizes;
    int n_sizes;
    setup *setups;
    int n_setups;
    candidate *cand;
    int n_cand, cap_cand;
    bp_sim_link link;
    double wall_s, cpu_s; /* of the timed stages: wall / cpu is the machine's slowdown */
    double wake_s;        /* how long a rank that waited takes to run again */
} tuner;

/* Zeroing the gradients, their sum of squares (for clipping) and the optimizer
 * step of one replica: what a stage does per replica between two pipelines. */
static int time_update(const tuner *t, bp_model *m, double *secs, bp_err *err) {
    bp_optim_config oc;
    bp_train_optim_config(&t->c->train, &oc);
    bp_optim o;
    size_t n = bp_model_num_params(m);
    int rc = bp_optim_init(&o, &oc, n, err);
    double best = DBL_MAX;
    for (int i = 0; rc == BP_OK && i <= TIMING_RUNS; i++) { /* run 0 warms caches */
        double t0 = bp_now();
        bp_model_zero_grad(m);
        (void)bp_grad_sumsq(bp_model_grads(m), n);
        bp_optim_step(&o, bp_model_params(m), bp_model_grads(m), 1e-3);
        double dt = bp_now() - t0;
        if (i > 0 && dt < best) best = dt;
    }
    bp_optim_free(&o);
    *secs = best;
    return rc;
}

/* Mean forward and backward CPU time of rb[0..N) taking turns; round 0 warms up. */
static int time_passes(tuner *t, bp_range_bench **rb, int N, bp_sim_stage *st, bp_err *err) {
    double tm[4];
    int rc = BP_OK, n = 0;
    for (int i = 0; rc == BP_OK && i <= STAGE_RUNS; i++)
        for (int j = 0; rc == BP_OK && j < N; j++) {
            rc = bp_range_bench_pass(rb[j], tm, err);
            if (i == 0) continue;
            st->fwd_s += tm[1], st->bwd_s += tm[3], n++;
            t->wall_s += tm[0] + tm[2];
            t->cpu_s += tm[1] + tm[3];
        }
    st->fwd_s /= n > 0 ? n : 1;
    st->bwd_s /= n > 0 ? n : 1;
    return rc;
}

/* Stage s of setup u: its times, memory and update. */
static int time_stage(tuner *t, setup *u, int s, bp_err *err) {
    const size_profile *p = &t->sizes[u->size];
    bp_sim_stage *st = &u->stage[s];
    int b0 = p->first[s], b1 = p->first[s + 1], made = 0, rc = BP_OK;
    bp_range_bench **rb = calloc((size_t)u->N, sizeof *rb);
    if (!rb) return bp_fail(err, BP_ENOMEM, "out of memory");
    for (; rc == BP_OK && made < u->N; made += rc == BP_OK)
        rc = bp_range_bench_create(&t->mc, b0, b1, p->micro_B, t->T, &rb[made], err);
    *st = (bp_sim_stage){0};
    if (rc == BP_OK) rc = time_passes(t, rb, u->N, st, err);
    bp_model *m = rc == BP_OK ? bp_range_bench_model(rb[0]) : NULL;
    if (rc == BP_OK) rc = time_update(t, m, &st->update_s, err);
    if (rc == BP_OK) {
        bp_optim_config oc;
        bp_train_optim_config(&t->c->train, &oc);
        u->param_bytes[s] = bp_model_num_params(m) * sizeof(bp_real);
        st->act_bytes = bp_range_bench_act_bytes(rb[0]);
        st->replica_bytes = u->param_bytes[s] * (size_t)(2 + bp_optim_num_buffers(&oc)) +
                            bp_model_workspace_bytes(m);
        st->out_bytes = (size_t)p->micro_B * (size_t)t->T *
                        (size_t)bp_model_boundary_width(&t->mc, b1) * sizeof(bp_real);
    }
    for (int j = 0; j < made; j++) bp_range_bench_destroy(rb[j]);
    free(rb);
    return rc;
}

static int time_setup(tuner *t, setup *u, bp_err *err) {
    u->stage = calloc((size_t)t->S, sizeof *u->stage);
    u->param_bytes = calloc((size_t)t->S, sizeof *u->param_bytes);
    if (!u->stage || !u->param_bytes) return bp_fail(err, BP_ENOMEM, "out of memory");
    int rc = BP_OK;
    for (int s = 0; rc == BP_OK && s < t->S; s++) rc = time_stage(t, u, s, err);
    return rc;
}

/* The stages of a micro-batch size: --partition, or balanced on its blocks' CPU
 * times (which a loaded machine disturbs less than wall-clock times). */
static int cut_stages(const tuner *t, size_profile *p, bp_err *err) {
    if (!(p->first = calloc((size_t)t->S + 1, sizeof *p->first)))
        return bp_fail(err, BP_ENOMEM, "out of memory");
    if (t->c->train.partition[0])
        return bp_partition_parse(t->c->train.partition, t->n_blocks, t->S, p->first, err)
                   ? bp_err_context(err, "option --partition")
                   : BP_OK;
    double *cost = malloc((size_t)t->n_blocks * sizeof *cost);
    bp_block_profile *prof = malloc((size_t)t->n_blocks * sizeof *prof);
    int rc = cost && prof ? BP_OK : bp_fail(err, BP_ENOMEM, "out of memory");
    if (rc == BP_OK) rc = bp_profile_blocks_split(&t->mc, p->micro_B, t->T, prof, err);
    for (int b = 0; rc == BP_OK && b < t->n_blocks; b++) cost[b] = prof[b].fwd_cpu_s + prof[b].bwd_cpu_s;
    if (rc == BP_OK) bp_partition_balance(cost, t->n_blocks, t->S, p->first);
    free(cost);
    free(prof);
    return rc;
}

/* Threads that stand for the job's other ranks while profiling: each runs passes
 * of about a stage's worth of blocks for the setup being profiled (its N replicas
 * taking turns), so the profiled computation shares the cores, caches and memory
 * bandwidth with them as a rank will with the others. */
enum { MAX_COMPANIONS = 64, MAX_REPLICAS = 64 };

typedef struct companion {
    pthread_t th;
    bp_range_bench *rb[MAX_REPLICAS];
    int n_rb;
    atomic_int *stop;
} companion;

typedef struct companions {
    companion c[MAX_COMPANIONS];
    int n;
    atomic_int stop;
} companions;

static void *run_companion(void *arg) {
    companion *c = arg;
    bp_err ignored;
    for (int j = 0; !atomic_load_explicit(c->stop, memory_order_relaxed); j = (j + 1) % c->n_rb)
        if (bp_range_bench_pass(c->rb[j], NULL, &ignored) != BP_OK) break;
    return NULL;
}

static void companion_free(companion *c) {
    for (int j = 0; j < c->n_rb; j++) bp_range_bench_destroy(c->rb[j]);
    c->n_rb = 0;
}

static int companion_start(const tuner *t, companion *c, int N, int micro_B, bp_err *err) {
    int blocks = (t->n_blocks + t->S - 1) / t->S, rc = BP_OK;
    c->n_rb = 0;
    for (; rc == BP_OK && c->n_rb < N && c->n_rb < MAX_REPLICAS; c->n_rb += rc == BP_OK)
        rc = bp_range_bench_create(&t->mc, 0, blocks, micro_B, t->T, &c->rb[c->n_rb], err);
    if (rc == BP_OK && pthread_create(&c->th, NULL, run_companion, c))
        rc = bp_fail(err, BP_ENOMEM, "cannot start a profiling thread");
    if (rc) companion_free(c);
    return rc;
}

/* n companions, each with N replicas of micro_B. */
static int companions_start(const tuner *t, companions *cs, int n, int N, int micro_B,
                            bp_err *err) {
    atomic_init(&cs->stop, 0);
    int rc = BP_OK;
    for (cs->n = 0; rc == BP_OK && cs->n < n && cs->n < MAX_COMPANIONS; cs->n += rc == BP_OK) {
        cs->c[cs->n].stop = &cs->stop;
        rc = companion_start(t, &cs->c[cs->n], N, micro_B, err);
    }
    return rc;
}

static void companions_stop(companions *cs) {
    atomic_store(&cs->stop, 1);
    for (int i = 0; i < cs->n; i++) {
        pthread_join(cs->c[i].th, NULL);
        companion_free(&cs->c[i]);
    }
    cs->n = 0;
}

/* A token handed back and forth between two threads that each run a pass of a
 * stage's worth of blocks before passing it on, the waiting one spinning with
 * sched_yield as an MPI rank does (mpi_yield_when_idle). */
typedef struct pingpong {
    atomic_int turn; /* 0: main thread, 1: partner, 2: stop */
    bp_range_bench *rb[2];
    double work_s[2]; /* wall time of each side's passes */
} pingpong;

static void work(pingpong *p, int side) {
    double t[4];
    bp_err ignored;
    if (bp_range_bench_pass(p->rb[side], t, &ignored) == BP_OK) p->work_s[side] += t[0] + t[2];
}

/* Wait for the token; false when told to stop. */
static bool await_turn(pingpong *p, int me) {
    int v;
    while ((v = atomic_load(&p->turn)) != me && v != 2) sched_yield();
    return v == me;
}

static void *partner(void *arg) {
    pingpong *p = arg;
    while (await_turn(p, 1)) {
        work(p, 1);
        atomic_store(&p->turn, 0);
    }
    return NULL;
}

/* How long after its message arrives a rank that waited for it runs again: the
 * handoffs' time beyond the passes, per handoff. On a machine with a core per rank
 * it is microseconds; with more runnable processes than cores, it is a share of
 * other processes' time slices, which grows with how long the ranks compute in
 * between, hence real passes at a middle micro-batch size. About a second. */
static int measure_wake(const tuner *t, double *wake, bp_err *err) {
    pingpong p = {.work_s = {0, 0}};
    atomic_init(&p.turn, 0);
    int blocks = (t->n_blocks + t->S - 1) / t->S, micro_B = t->sizes[t->n_sizes / 2].micro_B;
    int rc = bp_range_bench_create(&t->mc, 0, blocks, micro_B, t->T, &p.rb[0], err);
    if (rc == BP_OK) rc = bp_range_bench_create(&t->mc, 0, blocks, micro_B, t->T, &p.rb[1], err);
    pthread_t th;
    if (rc == BP_OK && pthread_create(&th, NULL, partner, &p))
        rc = bp_fail(err, BP_ENOMEM, "cannot start a profiling thread");
    int rounds = 0;
    double t0 = bp_now();
    while (rc == BP_OK && rounds < 500 && (rounds < 10 || bp_now() - t0 < 1.0)) {
        work(&p, 0);
        atomic_store(&p.turn, 1);
        await_turn(&p, 0);
        rounds++;
    }
    double total = bp_now() - t0;
    if (rc == BP_OK) {
        atomic_store(&p.turn, 2);
        pthread_join(th, NULL);
        *wake = fmax(0, (total - p.work_s[0] - p.work_s[1]) / (2 * rounds));
    }
    bp_range_bench_destroy(p.rb[0]);
    bp_range_bench_destroy(p.rb[1]);
    return rc;
}

/* Profile with the job's other ranks standing by as companion threads: W - 1
 * while one thread computes, W - 2 while two hand a token over. */
static int profile_all(tuner *t, bp_err *err) {
    int others = t->c->busy_threads >= 0 ? t->c->busy_threads : t->W - 1, rc = BP_OK;
    companions cs;
    for (int i = 0; rc == BP_OK && i < t->n_sizes; i++) {
        rc = companions_start(t, &cs, others, 1, t->sizes[i].micro_B, err);
        if (rc == BP_OK) rc = cut_stages(t, &t->sizes[i], err);
        companions_stop(&cs);
    }
    for (int j = 0; rc == BP_OK && j < t->n_setups; j++) {
        setup *u = &t->setups[j];
        rc = companions_start(t, &cs, others, u->N, t->sizes[u->size].micro_B, err);
        if (rc == BP_OK) rc = time_setup(t, u, err);
        companions_stop(&cs);
    }
    if (rc == BP_OK && t->W > 1 && t->c->wake_ms < 0) {
        rc = companions_start(t, &cs, others - 1, 1, t->sizes[0].micro_B, err);
        if (rc == BP_OK) rc = measure_wake(t, &t->wake_s, err);
        companions_stop(&cs);
    }
    return rc;
}

/* How much slower than its CPU time a computation runs here, now (or --load). */
static double slowdown(const tuner *t) {
    if (t->c->load >= 1) return t->c->load;
    return t->cpu_s > 0 && t->wall_s > t->cpu_s ? t->wall_s / t->cpu_s : 1.0;
}

/* Bytes per second of copying a buffer like the largest activation message: a
 * message between two processes on one machine is copied twice (into shared
 * memory and out of it), so a message moves at half this rate. */
static double copy_rate(size_t bytes) {
    if (bytes < 4096) bytes = 4096;
    unsigned char *a = bp_alloc(bytes), *b = bp_alloc(bytes);
    double best = DBL_MAX;
    for (int i = 0; a && b && i <= TIMING_RUNS; i++) {
        double t0 = bp_now();
        memcpy(b, a, bytes);
        double dt = bp_now() - t0;
        if (i > 0 && dt < best) best = dt;
    }
    bp_free(a), bp_free(b);
    return best > 0 && best < DBL_MAX ? (double)bytes / best : 0;
}

/* ---- candidates ----------------------------------------------------------------- */

/* *index: the size profile of micro_B, added (not yet measured) if new. */
static int size_index(tuner *t, int micro_B, int *index, bp_err *err) {
    for (*index = 0; *index < t->n_sizes; ++*index)
        if (t->sizes[*index].micro_B == micro_B) return BP_OK;
    size_profile *grown = realloc(t->sizes, (size_t)(t->n_sizes + 1) * sizeof *grown);
    if (!grown) return bp_fail(err, BP_ENOMEM, "out of memory");
    t->sizes = grown;
    t->sizes[t->n_sizes++] = (size_profile){.micro_B = micro_B};
    return BP_OK;
}

/* *index: the setup of N replicas at micro_B, added (not yet measured) if new. */
static int setup_index(tuner *t, int N, int micro_B, int *index, bp_err *err) {
    int size;
    int rc = size_index(t, micro_B, &size, err);
    if (rc) return rc;
    for (*index = 0; *index < t->n_setups; ++*index)
        if (t->setups[*index].N == N && t->setups[*index].size == size) return BP_OK;
    setup *grown = realloc(t->setups, (size_t)(t->n_setups + 1) * sizeof *grown);
    if (!grown) return bp_fail(err, BP_ENOMEM, "out of memory");
    t->setups = grown;
    t->setups[t->n_setups++] = (setup){.N = N, .size = size};
    return BP_OK;
}

/* The train options of one candidate. */
static void candidate_train(const tuner *t, const candidate *k, bp_train_config *out) {
    *out = t->c->train;
    out->pipelines = k->avgpipe ? k->N : 0;
    out->micro_batches = k->M;
    bp_schedule_name(&k->sched, out->pipe_schedule, sizeof out->pipe_schedule);
}

static int add_candidate(tuner *t, const candidate *k, bp_err *err) {
    bp_train_config tc;
    bp_err ignored;
    candidate_train(t, k, &tc);
    if (bp_train_config_check_world(&tc, t->W, &ignored) != BP_OK) return BP_OK; /* not valid */
    if (t->n_cand == t->cap_cand) {
        int cap = t->cap_cand ? 2 * t->cap_cand : 64;
        candidate *grown = realloc(t->cand, (size_t)cap * sizeof *grown);
        if (!grown) return bp_fail(err, BP_ENOMEM, "out of memory");
        t->cand = grown;
        t->cap_cand = cap;
    }
    t->cand[t->n_cand] = *k;
    return setup_index(t, k->N, t->c->train.batch / (t->dp * k->N * k->M),
                       &t->cand[t->n_cand++].setup, err);
}

static bool same_warmups(const tuner *t, const bp_schedule *a, const bp_schedule *b, int V) {
    for (int s = 0; s < t->S; s++)
        if (bp_schedule_warmup(a, t->S, s, V) != bp_schedule_warmup(b, t->S, s, V)) return false;
    return true;
}

/* The advance after K on a stream of V: 1, 2, 4, ... below V, then V (gpipe). */
static int next_advance(int K, int V) { return K * 2 < V ? K * 2 : K < V ? V : V + 1; }

/* 1f1b, afp:K for K = 1, 2, 4, ... below the stream's length V, and gpipe (afp:V);
 * one of each distinct set of warm-ups; or the one given. */
static int add_schedules(tuner *t, candidate *k, bp_err *err) {
    if (t->c->train.pipe_schedule[0]) {
        bp_schedule_parse(t->c->train.pipe_schedule, &k->sched, NULL);
        return add_candidate(t, k, err);
    }
    int V = k->N * k->M * t->c->train.grad_accum, rc = BP_OK;
    bp_schedule last = {BP_SCHED_1F1B, 0};
    k->sched = last;
    rc = add_candidate(t, k, err);
    for (int K = 1; rc == BP_OK && K <= V; K = next_advance(K, V)) {
        bp_schedule s = K == V ? (bp_schedule){BP_SCHED_GPIPE, 0} : (bp_schedule){BP_SCHED_AFP, K};
        if (same_warmups(t, &s, &last, V)) continue;
        last = k->sched = s;
        rc = add_candidate(t, k, err);
    }
    return rc;
}

/* N: --pipelines, else 1 (a plain pipeline), 2 and 4 (AvgPipe); M: --micro-batches,
 * else every M up to MAX_MICRO whose micro-batch is a whole number of samples. */
static int enumerate(tuner *t, bp_err *err) {
    const bp_train_config *tc = &t->c->train;
    int Ns[3] = {1, 2, 4}, n_N = 3, rc = BP_OK;
    if (tc->pipelines > 0) Ns[0] = tc->pipelines, n_N = 1;
    int per_rank = tc->batch / t->dp;
    for (int i = 0; rc == BP_OK && i < n_N; i++)
        for (int M = 1; rc == BP_OK && M <= MAX_MICRO; M++) {
            if ((tc->micro_batches && M != tc->micro_batches) || per_rank % (Ns[i] * M)) continue;
            candidate k = {.N = Ns[i], .M = M, .avgpipe = tc->pipelines > 0 || Ns[i] > 1};
            rc = add_schedules(t, &k, err);
        }
    if (rc == BP_OK && t->n_cand == 0)
        rc = bp_fail(err, BP_EUSAGE,
                     "no valid (pipelines, micro-batches, schedule): --batch %d must split into "
                     "micro-batches of whole samples over --dp %d",
                     tc->batch, t->dp);
    return rc;
}

/* ---- prediction ------------------------------------------------------------------ */

/* The collectives that end a step: the tied embedding's gradient between the first
 * and last stage (per replica), the ranks' agreement on the step (2 floats), the
 * global gradient norm over the stages (a float per replica), and across dp ranks
 * the gradients (an allreduce each step; other dp algorithms are costed alike) or,
 * for AvgPipe, the centers every --ea-period steps. */
static double sync_seconds(const tuner *t, const candidate *k, const bp_sim_link *l) {
    const setup *p = &t->setups[k->setup];
    double s = 0;
    if (t->mc.kind == BP_MODEL_GPT && t->S > 1)
        s += k->N * bp_sim_allreduce_s(l, 2,
                                       (size_t)t->mc.vocab * (size_t)t->mc.n_embd * sizeof(bp_real));
    s += bp_sim_allreduce_s(l, t->W, 2 * sizeof(float));
    s += bp_sim_allreduce_s(l, t->S, (size_t)k->N * sizeof(float));
    size_t params = 0;
    for (int i = 0; i < t->S; i++) params = p->param_bytes[i] > params ? p->param_bytes[i] : params;
    double dp_s = bp_sim_allreduce_s(l, t->dp, params);
    s += k->avgpipe ? dp_s / (double)t->c->train.ea_period : dp_s;
    return s;
}

/* Each replica's update, plus AvgPipe's elastic averaging every --ea-period steps,
 * which passes over every replica's weights about like an optimizer step does. */
static double update_seconds(const tuner *t, const candidate *k, double one) {
    double avg = k->avgpipe ? one / (double)t->c->train.ea_period : 0;
    return k->N * (one + avg);
}

/* Simulate candidate k with computation `slow` times its CPU time and ranks that
 * waited running again after `wake` seconds. */
static int simulate(const tuner *t, const candidate *k, double slow, double wake,
                    bp_sim_result *r) {
    const setup *p = &t->setups[k->setup];
    bp_sim_stage st[t->S];
    for (int s = 0; s < t->S; s++) {
        st[s] = p->stage[s];
        st[s].fwd_s *= slow;
        st[s].bwd_s *= slow;
        st[s].update_s = slow * update_seconds(t, k, p->stage[s].update_s);
    }
    bp_sim_config sc = {.S = t->S, .N = k->N, .M = k->M * t->c->train.grad_accum,
                        .sched = k->sched, .stage = st, .link = t->link};
    sc.link.wake_s = wake;
    sc.sync_s = sync_seconds(t, k, &sc.link);
    return bp_sim_run(&sc, r, NULL);
}

static int predict(const tuner *t, candidate *k) {
    bp_sim_result idle;
    int rc = simulate(t, k, slowdown(t), t->wake_s, &k->r);
    if (rc == BP_OK) rc = simulate(t, k, 1.0, 0.0, &idle);
    k->unloaded_s = idle.step_s;
    return rc;
}

/* Faster first; of equal times (to the microsecond), less memory first. */
static int by_time(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    long long tx = llround(x->r.step_s * 1e6), ty = llround(y->r.step_s * 1e6);
    if (tx != ty) return tx < ty ? -1 : 1;
    return (x->r.peak_bytes > y->r.peak_bytes) - (x->r.peak_bytes < y->r.peak_bytes);
}

/* ---- output --------------------------------------------------------------------- */

#define MB(x) ((double)(x) / 1048576.0)

/* One row of the profile table: a setup's partition and per stage its forward and
 * backward CPU ms and activation MB per micro-batch. */
static void print_setup(const tuner *t, const setup *u, FILE *out) {
    const size_profile *p = &t->sizes[u->size];
    char part[256];
    bp_partition_format(p->first, t->S, part, sizeof part);
    fprintf(out, "  %3d %5d  %-12s", u->N, p->micro_B, part);
    for (int s = 0; s < t->S; s++) {
        char cell[64];
        snprintf(cell, sizeof cell, "%.2f/%.2f %.2fMB", u->stage[s].fwd_s * 1e3,
                 u->stage[s].bwd_s * 1e3, MB(u->stage[s].act_bytes));
        fprintf(out, "  %-21s", cell);
    }
    fprintf(out, "\n");
}

static void print_header(const tuner *t, double secs, FILE *out) {
    const bp_train_config *tc = &t->c->train;
    fprintf(out, "bagpipe tune: %s", t->mc.kind == BP_MODEL_GPT ? "gpt" : "mlp");
    if (t->mc.kind == BP_MODEL_GPT)
        fprintf(out, " (%d layers, %d channels, seq %d)", tc->layers, tc->embd, tc->seq_len);
    fprintf(out, ", batch %d, dp %d x pp %d = %d ranks, network %s\n", tc->batch, t->dp, t->S,
            t->W, tc->net[0] ? tc->net : "off");
    fprintf(out, "profiled %d micro-batch sizes in %.1f s; machine load: computation runs %.2fx "
                 "its CPU time%s, a rank that waited runs again after %.3f ms%s\n",
            t->n_sizes, secs, slowdown(t), t->c->load >= 1 ? " (given)" : "", t->wake_s * 1e3,
            t->c->wake_ms >= 0 ? " (given)" : "");
    fprintf(out, "per stage with N replicas: forward/backward CPU ms and activation MB per "
                 "micro-batch\n");
    fprintf(out, "  %3s %5s  %-12s", "N", "micro", "partition");
    for (int s = 0; s < t->S; s++) fprintf(out, "  stage %-15d", s);
    fprintf(out, "\n");
    for (int i = 0; i < t->n_setups; i++) print_setup(t, &t->setups[i], out);
}

static bool fits(const tuner *t, const candidate *k) {
    return t->c->mem_cap_mb <= 0 || MB(k->r.peak_bytes) <= t->c->mem_cap_mb;
}

static void print_table(const tuner *t, FILE *out) {
    const bp_train_config *tc = &t->c->train;
    int rows = t->c->top > 0 && t->c->top < t->n_cand ? t->c->top : t->n_cand;
    fprintf(out, "predicted, fastest first (%d of %d candidates):\n", rows, t->n_cand);
    fprintf(out, "  %4s %3s %3s %5s  %-9s %9s %10s %8s %6s %4s %11s\n", "rank", "N", "M",
            "micro", "schedule", "step_ms", "samples/s", "peak_MB", "bubble", "fits",
            "unloaded_ms");
    for (int i = 0; i < rows; i++) {
        const candidate *k = &t->cand[i];
        char name[32];
        bp_schedule_name(&k->sched, name, sizeof name);
        fprintf(out, "  %4d %3d %3d %5d  %-9s %9.2f %10.1f %8.3f %5.0f%% %4s %11.2f\n", i + 1, k->N,
                k->M, t->sizes[t->setups[k->setup].size].micro_B, name, k->r.step_s * 1e3,
                tc->batch * tc->grad_accum / k->r.step_s, MB(k->r.peak_bytes), 100 * k->r.bubble,
                fits(t, k) ? "yes" : "no", k->unloaded_s * 1e3);
    }
}

/* An argument as the shell reads it back. */
static void print_arg(const char *a, FILE *out) {
    if (*a && strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=.,/:@%") ==
                  strlen(a)) {
        fprintf(out, " %s", a);
        return;
    }
    fputs(" '", out);
    for (; *a; a++) *a == '\'' ? fputs("'\\''", out) : fputc(*a, out);
    fputc('\'', out);
}

static bool is_chosen(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof chosen_options / sizeof chosen_options[0]; i++)
        if (strlen(chosen_options[i]) == len && !strncmp(chosen_options[i], name, len)) return true;
    return false;
}

/* The given options (already validated) except those the candidate decides. */
static void print_given(int argc, char **argv, FILE *out) {
    int n;
    bp_option *opts = bp_tune_options(&n);
    for (int i = 0; opts && i < argc; i++) {
        const char *name = argv[i] + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        bool flag = false;
        for (int j = 0; j < n; j++)
            if (strlen(opts[j].name) == len && !strncmp(opts[j].name, name, len))
                flag = opts[j].type == BP_OPT_FLAG;
        bool takes_next = !eq && !flag && i + 1 < argc;
        if (!is_chosen(name, len)) {
            print_arg(argv[i], out);
            if (takes_next) print_arg(argv[i + 1], out);
        }
        i += takes_next;
    }
    free(opts);
}

static void print_command(const tuner *t, const candidate *k, const char *prog, int argc,
                          char **argv, FILE *out) {
    bp_train_config tc;
    candidate_train(t, k, &tc);
    fprintf(out, " ");
    if (t->W > 1) fprintf(out, " mpirun -np %d", t->W);
    print_arg(prog, out);
    fprintf(out, " train");
    print_given(argc, argv, out);
    if (t->S > 1) {
        char part[256];
        bp_partition_format(t->sizes[t->setups[k->setup].size].first, t->S, part, sizeof part);
        fprintf(out, " --partition %s", part);
    }
    if (tc.pipelines > 0) fprintf(out, " --pipelines %d", tc.pipelines);
    fprintf(out, " --micro-batches %d --schedule %s\n", tc.micro_batches, tc.pipe_schedule);
}

static int choose(const tuner *t, const char *prog, int argc, char **argv, FILE *out, bp_err *err) {
    const candidate *best = NULL, *smallest = &t->cand[0];
    for (int i = 0; i < t->n_cand; i++) {
        if (!best && fits(t, &t->cand[i])) best = &t->cand[i];
        if (t->cand[i].r.peak_bytes < smallest->r.peak_bytes) smallest = &t->cand[i];
    }
    char name[32];
    if (!best) {
        bp_schedule_name(&smallest->sched, name, sizeof name);
        return bp_fail(err, BP_EUSAGE,
                       "option --mem-cap: no candidate fits in %g MB; the smallest needs %.3f MB "
                       "(N=%d, M=%d, %s)",
                       t->c->mem_cap_mb, MB(smallest->r.peak_bytes), smallest->N, smallest->M,
                       name);
    }
    bp_schedule_name(&best->sched, name, sizeof name);
    fprintf(out, "fastest%s: N=%d M=%d %s, %.2f ms per step, %.1f samples/s, peak %.3f MB\n",
            t->c->mem_cap_mb > 0 ? " within --mem-cap" : "", best->N, best->M, name,
            best->r.step_s * 1e3,
            t->c->train.batch * t->c->train.grad_accum / best->r.step_s, MB(best->r.peak_bytes));
    print_command(t, best, prog, argc, argv, out);
    return BP_OK;
}

/* ---- run ------------------------------------------------------------------------ */

static void tuner_free(tuner *t) {
    for (int i = 0; i < t->n_sizes; i++) free(t->sizes[i].first);
    for (int i = 0; i < t->n_setups; i++) {
        free(t->setups[i].stage);
        free(t->setups[i].param_bytes);
    }
    free(t->sizes);
    free(t->setups);
    free(t->cand);
}

/* How long messages take: the emulated network, or shared memory. */
static int set_link(tuner *t, bp_err *err) {
    int rc = bp_net_parse(t->c->train.net, &t->link.net, err);
    if (rc) return bp_err_context(err, "option --net");
    size_t largest = 0;
    for (int i = 0; i < t->n_setups; i++)
        for (int s = 0; s < t->S; s++)
            if (t->setups[i].stage[s].out_bytes > largest) largest = t->setups[i].stage[s].out_bytes;
    t->link.msg_s = t->c->msg_us * 1e-6;
    t->link.copy_Bps = copy_rate(largest) / 2;
    return BP_OK;
}

int bp_tune_run(const bp_tune_config *c, const char *prog, int argc, char **argv, FILE *out,
                bp_err *err) {
    tuner t = {.c = c, .S = c->train.pp, .dp = data_ranks(&c->train)};
    t.W = t.dp * t.S;
    t.wake_s = c->wake_ms > 0 ? c->wake_ms * 1e-3 : 0;
    bp_train_model_config(&c->train, &t.mc);
    t.T = t.mc.kind == BP_MODEL_GPT ? c->train.seq_len : 1;
    t.n_blocks = bp_model_num_blocks(&t.mc);
    bp_blas_set_threads(c->train.threads);
    double t0 = bp_now();
    int rc = enumerate(&t, err);
    if (rc == BP_OK) rc = profile_all(&t, err);
    if (rc == BP_OK) rc = set_link(&t, err);
    for (int i = 0; rc == BP_OK && i < t.n_cand; i++)
        if (predict(&t, &t.cand[i]) != BP_OK)
            rc = bp_fail(err, BP_EINTERNAL, "the pipeline simulation of candidate %d stalled", i);
    if (rc == BP_OK) {
        qsort(t.cand, (size_t)t.n_cand, sizeof *t.cand, by_time);
        print_header(&t, bp_now() - t0, out);
        print_table(&t, out);
        rc = choose(&t, prog, argc, argv, out, err);
    }
    tuner_free(&t);
    return rc;
}

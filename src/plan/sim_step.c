#include "plan/sim_step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/cost.h"
#include "nn/real.h"
#include "parallel/buckets.h"
#include "parallel/dp/algo.h"
#include "parallel/dp/easgd.h"
#include "parallel/occ.h"
#include "plan/sim_model.h"

/* What stage s of the grid costs, apart from its pipeline neighbours. */
typedef struct stage_info {
    int b0, b1, layers; /* blocks [b0, b1), of which transformer blocks */
    size_t params;      /* one replica's, on one tp rank */
    bp_sim_tensor *tens;
    int nt, skip;       /* tensors; the one left out of the buckets (-1: none) */
    double fwd_s, bwd_s; /* one micro-batch, tp allreduces included */
    double tp_s;        /* one tp allreduce of the residual stream */
    double *blk_bwd_s;  /* [b1 - b0]: each block's backward, its tp allreduces included */
    bp_sim_link dp_link; /* the algorithm's: among all dp ranks, or (hierarchical)
                          * among one leader per node */
    int dp_p;            /* ranks the algorithm runs over */
    int dp_m;            /* dp ranks of the group on one node (1: all on others) */
    bp_sim_link dp_local; /* hierarchical: within the node, reduce and broadcast */
} stage_info;

typedef struct ctx {
    const bp_sim_job *j;
    const bp_sim_machine *m;
    /* The communication thread's machine: with a profile, its kernels run at their
     * unloaded speed, since the thread runs at a raised priority (buckets.h) and
     * takes a core as soon as it wakes. */
    bp_sim_machine comm_m;
    bp_sim_profile comm_prof;
    int W, V, T;        /* ranks, stream length N x M, positions of a sample */
    stage_info *st;     /* [pp] */
    bp_sim_link pp_link, embed_link, world_link;
    /* The pipeline's messages leave by each node's one network card, which its other
     * transfers use too: its stages span nodes and links are not per pair. */
    bool pp_on_cards;
} ctx;

/* One step's figures, before averaging over the run. */
typedef struct step_out {
    double step_s, compute_s, bubble, peak;
    int stash;
    double exposed[BP_SIM_AXES], bytes[BP_SIM_AXES], max_bytes[BP_SIM_AXES];
} step_out;

/* Rounds toward the step's length with its links shared (one_step). */
#define BP_SIM_SHARE_ROUNDS 4

/* ---- messages -------------------------------------------------------------------- */

static double allreduce_s(const ctx *c, const bp_sim_link *l, int p, size_t n, double *bytes) {
    *bytes += bp_dp_ring_bytes(p, n);
    return bp_sim_ring_allreduce_s(c->m, l, p, n);
}

/* ---- the stages -------------------------------------------------------------------- */

/* Floats of one micro-batch's activation entering block b (its gradient alike). */
static size_t boundary_floats(const ctx *c, int b) {
    return (size_t)c->j->micro_B * (size_t)c->T * (size_t)bp_model_boundary_width(&c->j->mc, b);
}

/* One replica's optimizer step with its bookkeeping on stage s: as measured, or the
 * machine's. */
static double update_one_s(const ctx *c, int s) {
    return c->j->measured ? c->j->measured[s].update_s : bp_sim_optim_s(c->m, c->st[s].params);
}

/* Each block's backward of stage s, when the stage was measured whole: its time
 * split in proportion to the blocks' costs. */
static void split_measured(const ctx *c, int s, stage_info *si) {
    const bp_sim_job *j = c->j;
    double total = 0;
    for (int b = si->b0; b < si->b1; b++)
        total += si->blk_bwd_s[b - si->b0] = bp_sim_block_cost(&j->mc, j->tp, b, j->micro_B, c->T);
    for (int b = si->b0; b < si->b1; b++)
        si->blk_bwd_s[b - si->b0] *= total > 0 ? j->measured[s].bwd_s / total : 0;
    si->fwd_s = j->measured[s].fwd_s;
    si->bwd_s = j->measured[s].bwd_s;
}

static int rank_of(const bp_sim_job *j, int d, int p, int t) { return p * j->dp * j->tp + d * j->tp + t; }

/* Stage s's dp group: ranks first + d x tp. Hierarchical, across nodes: the
 * algorithm runs among one leader per node, whose link the node's other dp
 * groups (one per tp rank) share, after a reduction within the node. */
static void dp_links(const ctx *c, int s, stage_info *si) {
    const bp_sim_job *j = c->j;
    const bp_sim_machine *m = c->m;
    int first = rank_of(j, 0, s, 0), rpn = m->ranks_per_node;
    si->dp_link = bp_sim_group_link(m, first, j->tp, j->dp, c->W);
    si->dp_p = j->dp;
    si->dp_m = 1;
    for (int d = 1; rpn > 0 && d < j->dp; d++) si->dp_m += (first + d * j->tp) / rpn == first / rpn;
    if (rpn <= 0) si->dp_m = j->dp;
    if (!j->dpc.hierarchical || si->dp_m <= 1 || si->dp_m >= j->dp) return;
    si->dp_local = bp_sim_group_link(m, first, j->tp, si->dp_m, c->W);
    si->dp_p = j->dp / si->dp_m;
    si->dp_link = m->inter;
    int groups = m->per_pair ? 1 : (rpn < c->W ? rpn : c->W) / si->dp_m;
    if (groups > 1 && si->dp_link.net.on) si->dp_link.net.bw_bps /= groups;
    if (groups > 1 && si->dp_link.copy_Bps > 0) si->dp_link.copy_Bps /= groups;
}

/* Hierarchical: the reduction to the node's leader and the broadcast back, each a
 * binomial tree of whole messages as comm/ runs them (comm/prim.c), the reduction
 * adding at every level. *bytes, counted per rank as the mean over the
 * node's ranks, gets that and takes the leader's share of `leader_bytes` (what the
 * algorithm among the leaders sent). */
static double local_s(const ctx *c, const stage_info *si, size_t n, double leader_bytes,
                      double *bytes) {
    if (si->dp_p == c->j->dp) return 0;
    *bytes += bp_dp_ring_bytes(si->dp_m, n) - leader_bytes * (1.0 - 1.0 / si->dp_m);
    double levels = ceil(log2(si->dp_m));
    return levels * (2.0 * (bp_sim_message_s(&si->dp_local, n * sizeof(bp_real)) +
                            si->dp_local.wake_s) +
                     bp_sim_vec_s(c->m, n));
}

static bp_status stage_init(ctx *c, int s) {
    const bp_sim_job *j = c->j;
    const bp_model_config *mc = &j->mc;
    stage_info *si = &c->st[s];
    si->b0 = j->first[s], si->b1 = j->first[s + 1];
    si->nt = bp_sim_model_tensors(mc, j->tp, si->b0, si->b1, NULL);
    si->tens = malloc((size_t)si->nt * sizeof *si->tens);
    si->blk_bwd_s = calloc((size_t)(si->b1 - si->b0), sizeof(double));
    if (!si->tens || !si->blk_bwd_s) return BP_ENOMEM;
    bp_sim_model_tensors(mc, j->tp, si->b0, si->b1, si->tens);
    si->params = bp_sim_model_params(mc, j->tp, si->b0, si->b1);
    si->skip = -1;
    if (j->fused_embedding && j->pp > 1 && (s == 0 || s == j->pp - 1))
        si->skip = s == 0 ? 0 : si->nt - 1; /* wte, or the head's copy of it */
    bp_sim_link tp_link = bp_sim_group_link(c->m, rank_of(j, 0, s, 0), 1, j->tp, c->W);
    si->tp_s = bp_sim_ring_allreduce_s(c->m, &tp_link, j->tp, boundary_floats(c, si->b0));
    for (int b = si->b0; b < si->b1; b++) {
        bool layer = bp_sim_block_kind_of(mc, b) == BP_SIM_MIDDLE;
        double tp = layer && j->tp > 1 ? 2 * si->tp_s : 0;
        si->layers += layer;
        if (j->measured) continue;
        si->fwd_s += bp_sim_block_s(c->m, mc, j->tp, b, j->micro_B, c->T, false) + tp;
        si->blk_bwd_s[b - si->b0] = bp_sim_block_s(c->m, mc, j->tp, b, j->micro_B, c->T, true) + tp;
        si->bwd_s += si->blk_bwd_s[b - si->b0];
    }
    if (j->measured) split_measured(c, s, si);
    dp_links(c, s, si);
    return BP_OK;
}

/* Compressed backpropagation of stage s > 0: the wire of P and Q, and encoding
 * (two projections, the error's P Q^T and the receiver's P Q^T). */
static void cb_costs(const ctx *c, int s, bp_sim_stage *st) {
    const bp_sim_job *j = c->j;
    if (j->cb_rank <= 0 || s == 0) return;
    size_t floats = boundary_floats(c, c->st[s].b0);
    double rows = (double)j->micro_B * c->T, cols = (double)floats / rows;
    double r = j->cb_rank < rows && j->cb_rank < cols ? j->cb_rank : fmin(rows, cols);
    st->cb_sends = j->cb_epilogue_only ? j->pp - s : c->V;
    if (st->cb_sends > c->V) st->cb_sends = c->V;
    st->cb_bytes = (size_t)((rows + cols) * r) * sizeof(bp_real);
    st->cb_s = bp_sim_matmul_s(c->m, 8.0 * rows * cols * r) + bp_sim_vec_s(c->m, 2 * floats);
}

/* Steps of one pipeline stream (1: a flush every step). */
static int stream_steps(const bp_sim_job *j) { return j->stream_steps > 1 ? j->stream_steps : 1; }

/* One replica's tied tensor allreduce (first and last stages, or every replica's). */
static double embed_one_s(const ctx *c, double *bytes) {
    const bp_sim_job *j = c->j;
    size_t n = bp_sim_tied_numel(&j->mc);
    if (j->pp <= 1 || n == 0) return 0;
    int ranks = j->fused_embedding ? 2 * j->dp : 2;
    return allreduce_s(c, &c->embed_link, ranks, n, bytes);
}

static bp_status run_pipeline(const ctx *c, const double *shared, bp_sim_result *r,
                              bp_sim_stage_result *per) {
    const bp_sim_job *j = c->j;
    bp_sim_stage *st = calloc((size_t)j->pp, sizeof *st);
    if (!st) return BP_ENOMEM;
    for (int s = 0; s < j->pp; s++) {
        double unused = 0;
        bool ends = s == 0 || s == j->pp - 1;
        st[s] = (bp_sim_stage){.fwd_s = c->st[s].fwd_s, .bwd_s = c->st[s].bwd_s,
                               .out_bytes = boundary_floats(c, c->st[s].b1) * sizeof(bp_real),
                               .inline_update_s = update_one_s(c, s) +
                                        (ends ? embed_one_s(c, &unused) : 0),
                               .link_shared = shared[s]};
        cb_costs(c, s, &st[s]);
    }
    bp_sim_config sc = {.S = j->pp, .N = j->N, .M = j->M, .stream_len = stream_steps(j),
                        .tied = bp_sim_tied_numel(&j->mc) > 0,
                        .tied_rides_pipeline = j->pp == 2 || c->pp_on_cards,
                        .sched = j->sched, .stage = st, .link = c->pp_link};
    bp_status rc = bp_sim_run(&sc, r, per);
    free(st);
    return rc;
}

/* ---- data parallelism -------------------------------------------------------------- */

/* The algorithm stage s runs, in a step of the warm-up (warm) or after, and its
 * settings in *cfg: Optimus-CC's compressed stages run PowerSGD with their own rank,
 * compressing every matrix; in the warm-up an algorithm that has one runs as
 * allreduce. */
static const bp_dp_algo_ops *stage_algo(const ctx *c, int s, bool warm, bp_dp_config *cfg) {
    const bp_sim_job *j = c->j;
    *cfg = j->dpc;
    if (!j->avgpipe) { /* Optimus-CC's stage compression, as the runtime sets it */
        bp_occ_config occ = {.sc_stages = j->sc_stages, .sc_rank = j->sc_rank,
                             .sc_warmup_steps = j->sc_warmup};
        bp_occ_dp_config(&occ, s, j->pp, NULL, cfg);
    }
    const bp_dp_algo_ops *ops = bp_dp_ops(j->avgpipe ? BP_DP_AVGPIPE : cfg->algo);
    if (warm && ops->cost.warmup) ops = &bp_dp_allreduce;
    return ops;
}

/* Where stage s's algorithm runs, on machine m. */
static bp_dp_cost_env cost_env(const ctx *c, int s, const bp_sim_machine *m,
                               const bp_dp_config *cfg) {
    const stage_info *si = &c->st[s];
    return (bp_dp_cost_env){.price = &bp_sim_prices, .machine = m, .link = &si->dp_link, .p = si->dp_p,
                            .here = si->dp_p < c->j->dp ? 1 : si->dp_m, .cfg = cfg,
                            .replicas = c->j->N};
}

/* The kernel of stage s's backward on the device at time t, its last backward having
 * started at `start` (0 once it is over, or where a host computes: codecs there are
 * the host's, beside nothing on a device). */
static double kernel_at(const ctx *c, const stage_info *si, double start, double t) {
    if (c->m->prof) return 0;
    for (int b = si->b1 - 1; b >= si->b0; b--) {
        start += si->blk_bwd_s[b - si->b0];
        if (t < start)
            return bp_sim_block_s(c->m, &c->j->mc, c->j->tp, b, c->j->micro_B, c->T, true) /
                   BP_MODEL_BLOCK_KERNELS;
    }
    return 0;
}

/* One bucket's seconds on the communication thread from t: its device passes wait
 * for backward's kernels while backward runs (until bwd_end), the share of them
 * that falls before it. */
static double bucket_s(const ctx *c, const stage_info *si, const bp_dp_algo_ops *ops,
                       bp_dp_cost_env e, const bp_dp_cost_bucket *cb, double start, double t,
                       double *bytes) {
    double b = 0, alone = ops->cost.bucket(&e, cb, &b);
    double bwd_end = start + si->bwd_s, s = alone;
    if ((e.beside_kernel_s = kernel_at(c, si, start, t)) > 0) {
        double b2 = 0, waiting = ops->cost.bucket(&e, cb, &b2);
        s += (waiting - alone) * fmin(1, (bwd_end - t) / waiting);
    }
    *bytes += b;
    return s;
}

/* When stage s's communication thread finishes its buckets, backward's last pass
 * having started at `start` and the stage's operations ending at `end`. The
 * buckets are planned as the bucketer plans them, each ready when backward has
 * finished its lowest block, and run one after another. */
static double buckets_end(const ctx *main, int s, bool warm, double start, double end,
                          double *bytes) {
    ctx comm = *main; /* the costs below run on the communication thread */
    comm.m = &main->comm_m;
    const ctx *c = &comm;
    const bp_sim_job *j = c->j;
    const stage_info *si = &c->st[s];
    bp_dp_config cfg;
    const bp_dp_algo_ops *ops = stage_algo(c, s, warm, &cfg);
    if (j->dp <= 1 || j->N > 1 || j->avgpipe || !ops->cost.bucket) return end;
    bp_dp_cost_env e = cost_env(c, s, c->m, &cfg);
    bp_bucket_tensor *bt = malloc((size_t)si->nt * sizeof *bt);
    bp_bucket *bk = malloc((size_t)si->nt * sizeof *bk);
    double t = 0;
    if (!bt || !bk) {
        free(bt), free(bk);
        return NAN;
    }
    size_t off = 0;
    for (int i = 0; i < si->nt; i++) {
        bt[i] = (bp_bucket_tensor){off, si->tens[i].numel, si->tens[i].block};
        off += si->tens[i].numel;
    }
    int n = bp_buckets_plan(bt, si->nt, (size_t)(j->dpc.bucket_mb * 1048576.0), si->skip, bk);
    for (int i = 0; i < n; i++) {
        /* Backward finishes blocks from the last to the first. */
        double ready = start;
        for (int b = si->b1 - 1; b >= bk[i].min_block; b--) ready += si->blk_bwd_s[b - si->b0];
        if (!j->dpc.overlap) ready = end;
        t = fmax(t, ready);
        double b = 0;
        bp_dp_cost_bucket cb = {si->tens + bk[i].first_tensor, bk[i].n_tensors, bk[i].len};
        t += bucket_s(main, si, ops, e, &cb, start, t, &b);
        t += local_s(c, si, bk[i].len, b, &b);
        *bytes += b;
    }
    free(bt), free(bk);
    return fmax(t, end);
}

/* What stage s's algorithm does after the optimizer in a step of step_s, its
 * transfers on `link`, into *o; false where it does nothing there (no such cost,
 * or one rank without local replicas). */
static bool algo_step(const ctx *c, int s, bool warm, double step_s, const bp_sim_link *link,
                      bp_dp_step_cost *o) {
    bp_dp_config cfg;
    const bp_dp_algo_ops *ops = stage_algo(c, s, warm, &cfg);
    if (!ops->cost.step || (c->st[s].dp_p <= 1 && !ops->local_replicas)) return false;
    bp_dp_cost_env e = cost_env(c, s, c->m, &cfg);
    e.link = link;
    e.step_s = step_s;
    *o = (bp_dp_step_cost){.every = 1};
    ops->cost.step(&e, c->st[s].params, o);
    return true;
}

/* What the algorithm does after the optimizer on stage s, per step on average. */
static double mix_s(const ctx *c, int s, bool warm, double step_s, double hide_s,
                    double *bytes) {
    const stage_info *si = &c->st[s];
    bp_dp_step_cost o;
    if (!algo_step(c, s, warm, step_s, &si->dp_link, &o)) return 0;
    double t = o.s, b = o.bytes;
    if (t > 0) t += local_s(c, si, si->params, b, &b);
    if (o.overlapped) t = fmax(0, t - hide_s);
    *bytes += b / o.every;
    return t / o.every;
}

/* ---- one step ----------------------------------------------------------------------- */

static double peak_memory(const ctx *c, int s, int stash) {
    const bp_sim_job *j = c->j;
    double n = (double)c->st[s].params * sizeof(bp_real);
    bp_dp_config cfg;
    double extra = stage_algo(c, s, false, &cfg)->cost.state * n;
    if (j->dp <= 1 && !j->avgpipe) extra = 0;
    if (j->measured)
        return j->N * (double)j->measured[s].replica_bytes + extra +
               stash * (double)j->measured[s].act_bytes;
    double act = (double)bp_sim_act_bytes(&j->mc, j->tp, c->st[s].b0, c->st[s].b1, j->micro_B,
                                          c->T);
    return j->N * n * (2 + j->optim_buffers) + extra + stash * act;
}

/* Bytes stage s sends to its pipeline neighbours in a step: every activation
 * forward and every gradient backward, less what compression saves. */
static double pp_bytes(const ctx *c, int s) {
    const bp_sim_job *j = c->j;
    double out = (double)boundary_floats(c, c->st[s].b1) * sizeof(bp_real);
    double in = (double)boundary_floats(c, c->st[s].b0) * sizeof(bp_real);
    bp_sim_stage st = {0};
    cb_costs(c, s, &st);
    return c->V * (out * (s < j->pp - 1) + in * (s > 0)) - st.cb_sends * (in - (double)st.cb_bytes);
}

/* The figures of stage s that do not depend on the others. */
static void stage_figures(const ctx *c, int s, double dp_bytes, const bp_sim_stage_result *per,
                          step_out *o) {
    const bp_sim_job *j = c->j;
    double tpb = j->tp > 1 ? 4.0 * c->st[s].layers * c->V * bp_dp_ring_bytes(j->tp, boundary_floats(c, c->st[s].b0))
                       : 0;
    double b[BP_SIM_AXES] = {dp_bytes, pp_bytes(c, s), tpb, 0};
    for (int a = 0; a < BP_SIM_AXES; a++) {
        o->max_bytes[a] = fmax(o->max_bytes[a], b[a]);
        o->bytes[a] += b[a] * j->dp * j->tp; /* every dp and tp rank of the stage alike */
    }
    o->peak = fmax(o->peak, peak_memory(c, s, per->peak_stash));
    if (per->peak_stash > o->stash) o->stash = per->peak_stash;
}

/* The ranks' meetings (agreements) per step: 1, or with local steps one a period
 * (a stream of K steps agrees once, K <= the period). */
static double meetings_per_step(const ctx *c, bool warm) {
    const bp_sim_job *j = c->j;
    const bp_dp_algo_ops *ops = bp_dp_ops(j->dpc.algo);
    if (!j->local_steps || (warm && ops && ops->cost.warmup)) return 1;
    double period = j->avgpipe ? (double)bp_easgd_of(&j->dpc.settings)->period
                               : bp_dp_steps_per_meeting(&j->dpc);
    return stream_steps(j) / period;
}

/* The collectives every rank waits for after its buckets: the tied embedding
 * (first and last stage, each replica in turn), the agreement on the step (2
 * floats over all ranks) and the gradient norm over tp and pp, the last two only
 * at the replicas' meetings with local steps (every --ea-period steps; DiLoCo's
 * outer steps and fragments; every step of a warm-up). From `ready`, when each
 * stage's buckets are done; *embed_end: when the embedding is in sync. */
static double end_of_backward(const ctx *c, bool warm, const double *ready, double *embed_end,
                              step_out *o) {
    const bp_sim_job *j = c->j;
    int S = j->pp;
    double embed = 0, eb = 0, unused = 0;
    for (int k = 0; k < j->N; k++) embed += embed_one_s(c, &eb);
    *embed_end = fmax(ready[0], ready[S - 1]) + embed;
    o->max_bytes[BP_SIM_EMBED] = eb;
    o->bytes[BP_SIM_EMBED] = S > 1 ? eb * 2 * j->dp * j->tp : 0; /* first and last stages */
    double t = *embed_end, agree = allreduce_s(c, &c->world_link, c->W, 2, &unused);
    for (int s = 0; s < S; s++) t = fmax(t, ready[s]);
    if (j->tp > 1) {
        bp_sim_link l = bp_sim_group_link(c->m, 0, 1, j->tp, c->W);
        agree += allreduce_s(c, &l, j->tp, (size_t)j->N, &unused);
    }
    if (S > 1) agree += allreduce_s(c, &c->pp_link, S, (size_t)j->N, &unused);
    return t + agree * meetings_per_step(c, warm);
}

/* The rounds of the agreement (a small allreduce over p ranks) with a message from a
 * rank to the next, the direction of async's ring (comm/coll.c): its binomial
 * reduce toward rank 0 sends rank r + mask to r, along the ring only where mask is
 * p - 1; its broadcast's last round sends r to r + 1. Two ranks exchange both ways. */
static int rounds_along_ring(int p) {
    if (p <= 1) return 0;
    int along = 1; /* the broadcast's last round */
    for (int mask = 1; mask < p; mask <<= 1) along += mask == p - 1;
    return along;
}

/* What the agreement's messages wait at a meeting behind the dp algorithm's own
 * background transfers in the same connections (async's rounds, stage 0's group
 * standing for all), per step: a round of it whose messages ride the ring's
 * connections waits queue_s; the others go over connections the ring leaves idle
 * (measured: 4 emulated V100s at 1 Gbit/s, a meeting 12-19 ms longer with a ring's
 * chunk of 29 ms on the wire 81% of the time: one wait, not one per round). */
static double agree_queue_s(const ctx *c, bool warm, double step_s) {
    bp_dp_step_cost o;
    if (c->st[0].dp_p <= 1 || !algo_step(c, 0, warm, step_s, &c->st[0].dp_link, &o)) return 0;
    return o.queue_s * rounds_along_ring(c->W) * meetings_per_step(c, warm);
}

/* Optimizer steps of stage s's replicas. */
static double optim_s(const ctx *c, int s) { return c->j->N * update_one_s(c, s); }

/* A step, the links of stage s to its pipeline neighbours shared with its dp
 * transfers for shared[s] of the time. */
static bp_status step_with(const ctx *c, bool warm, const double *shared, step_out *o) {
    const bp_sim_job *j = c->j;
    int S = j->pp;
    bp_sim_result pr;
    bp_sim_stage_result *per = calloc((size_t)S, sizeof *per);
    double *ready = calloc((size_t)S, sizeof(double));
    bp_status rc = per && ready ? run_pipeline(c, shared, &pr, per) : BP_ENOMEM;
    memset(o, 0, sizeof *o);
    for (int s = 0; rc == BP_OK && s < S; s++) {
        double dpb = 0;
        ready[s] = buckets_end(c, s, warm, per[s].last_bwd_start_s, per[s].end_s, &dpb);
        if (isnan(ready[s])) rc = BP_ENOMEM;
        stage_figures(c, s, dpb, &per[s], o);
    }
    if (rc == BP_OK) {
        /* a stream of K steps: its time over K (the averaging, once a period, is
         * counted per step by mix_s) */
        int K = stream_steps(j);
        double embed_end, sync = end_of_backward(c, warm, ready, &embed_end, o), last = 0, mix0 = 0;
        /* async's cost depends on the step's length (rounds per step): the step
         * without it first, then with it at that length */
        for (int pass = 0; pass < 2; pass++) {
            double len = pass ? (sync + last) / K : 0;
            last = 0;
            for (int s = 0; s < S; s++) {
                double unused = 0, mix = K * mix_s(c, s, warm, len, per[s].end_s, &unused);
                last = fmax(last, optim_s(c, s) + mix);
                if (s == 0) mix0 = mix;
            }
        }
        o->step_s = (sync + last) / K;
        double queue = agree_queue_s(c, warm, o->step_s);
        o->step_s += queue;
        for (int s = 0; s < S; s++) { /* async's bytes depend on the step's length */
            double mb = 0;
            mix_s(c, s, warm, o->step_s, per[s].end_s, &mb);
            o->bytes[BP_SIM_DP] += mb * j->dp * j->tp;
            o->max_bytes[BP_SIM_DP] = fmax(o->max_bytes[BP_SIM_DP], mb);
        }
        o->bubble = pr.bubble;
        o->exposed[BP_SIM_DP] = (ready[0] - per[0].end_s + mix0) / K + queue;
        o->exposed[BP_SIM_PP] = per[0].idle_s / K;
        o->exposed[BP_SIM_TP] = j->tp > 1 ? 4.0 * c->st[0].layers * c->V * c->st[0].tp_s : 0;
        o->exposed[BP_SIM_EMBED] = S > 1 ? (embed_end - ready[0] + per[0].meet_s) / K : 0;
        o->compute_s = o->step_s;
        for (int a = 0; a < BP_SIM_AXES; a++) o->compute_s -= o->exposed[a];
    }
    free(per);
    free(ready);
    return rc;
}

/* The share of a step of step_s in which stage s's link to its pipeline neighbours
 * also carries its dp transfers beside forward and backward (async's rounds, an
 * overlapped exchange): where both leave the node by its one network card (the
 * pipeline and the dp group span nodes; links are not per pair). The dp transfers
 * are priced on what the pipeline's own messages leave of the link (on the wire p of
 * the step, they stretch the dp transfers by that share in turn). */
static double link_shared(const ctx *c, int s, bool warm, double step_s) {
    const bp_sim_job *j = c->j;
    const stage_info *si = &c->st[s];
    if (!c->pp_on_cards || si->dp_p <= 1 || step_s <= 0 ||
        !bp_sim_group_spans(c->m, rank_of(j, 0, s, 0), j->tp, j->dp))
        return 0;
    const bp_sim_link *pl = &c->pp_link;
    double wire = bp_sim_message_s(pl, (size_t)pp_bytes(c, s)) - bp_sim_message_s(pl, 0);
    double p = fmin(1, wire / step_s);
    bp_sim_link left = si->dp_link;
    if (left.net.on) left.net.bw_bps /= 1 + p;
    if (left.copy_Bps > 0) left.copy_Bps /= 1 + p;
    bp_dp_step_cost o;
    if (!algo_step(c, s, warm, step_s, &left, &o)) return 0;
    return o.overlapped ? fmin(1, o.s / (o.every * step_s)) : o.busy;
}

/* The step with its shared links: the shares depend on the step's length, so from
 * the step without them, a few rounds toward the length they give. */
static bp_status one_step(const ctx *c, bool warm, step_out *o) {
    int S = c->j->pp;
    *o = (step_out){0};
    double *shared = calloc((size_t)S, sizeof(double));
    bp_status rc = shared ? step_with(c, warm, shared, o) : BP_ENOMEM;
    for (int round = 0; rc == BP_OK && round < BP_SIM_SHARE_ROUNDS; round++) {
        bool moved = false;
        for (int s = 0; s < S; s++) {
            double x = link_shared(c, s, warm, o->step_s);
            moved |= fabs(x - shared[s]) > 1e-3;
            shared[s] = x;
        }
        if (!moved) break;
        rc = step_with(c, warm, shared, o);
    }
    free(shared);
    return rc;
}

/* ---- the run ------------------------------------------------------------------------ */

static void ctx_free(ctx *c) {
    for (int s = 0; c->st && s < c->j->pp; s++) {
        free(c->st[s].tens);
        free(c->st[s].blk_bwd_s);
    }
    free(c->st);
}

static bp_status ctx_init(ctx *c, const bp_sim_job *j, const bp_sim_machine *m) {
    *c = (ctx){.j = j, .m = m, .W = j->dp * j->pp * j->tp, .V = j->N * j->M,
               .T = bp_model_sample_len(&j->mc)};
    c->pp_link = bp_sim_group_link(m, 0, j->dp * j->tp, j->pp, c->W);
    c->pp_on_cards = !m->per_pair && bp_sim_group_spans(m, 0, j->dp * j->tp, j->pp);
    c->embed_link = bp_sim_group_link(m, 0, (j->pp - 1) * j->dp * j->tp, 2, c->W);
    if (j->fused_embedding) c->embed_link = bp_sim_group_link(m, 0, j->tp, j->dp, c->W);
    if (j->fused_embedding && j->pp > 1 && j->dp == 1) c->embed_link = c->pp_link;
    c->world_link = bp_sim_group_link(m, 0, 1, c->W, c->W);
    c->comm_m = *m;
    if (m->prof) {
        c->comm_prof = *m->prof;
        c->comm_prof.slowdown = 1;
        c->comm_m.prof = &c->comm_prof;
    }
    if (!(c->st = calloc((size_t)j->pp, sizeof *c->st))) return BP_ENOMEM;
    bp_status rc = BP_OK;
    for (int s = 0; rc == BP_OK && s < j->pp; s++) rc = stage_init(c, s);
    return rc;
}

/* Steps of the run with full-precision gradients first (the algorithm's warm-up:
 * qadam, powersgd, async; or --sc-stages), at most the run. */
static int64_t warm_steps(const bp_sim_job *j) {
    const bp_dp_algo_ops *ops = bp_dp_ops(j->dpc.algo);
    int64_t w = 0;
    if (j->sc_stages > 0) w = j->sc_warmup;
    else if (ops && ops->cost.warmup) w = ops->cost.warmup(&j->dpc);
    return w < j->steps ? w : j->steps;
}

bp_status bp_sim_step(const bp_sim_job *j, const bp_sim_machine *m, bp_sim_step_result *r, bp_err *err) {
    memset(r, 0, sizeof *r);
    ctx c;
    bp_status rc = ctx_init(&c, j, m);
    int64_t warm = warm_steps(j), steps = j->steps > 0 ? j->steps : 1;
    double weight[2] = {(double)warm / (double)steps, 1.0 - (double)warm / (double)steps};
    for (int phase = 0; rc == BP_OK && phase < 2; phase++) {
        if (weight[phase] <= 0) continue;
        step_out o;
        rc = one_step(&c, phase == 0, &o);
        double w = weight[phase];
        r->step_s += w * o.step_s;
        r->compute_s += w * o.compute_s;
        r->bubble += w * o.bubble;
        r->peak_bytes = fmax(r->peak_bytes, o.peak);
        if (o.stash > r->peak_stash) r->peak_stash = o.stash;
        for (int a = 0; a < BP_SIM_AXES; a++) {
            r->exposed_s[a] += w * o.exposed[a];
            r->bytes[a] += w * o.bytes[a];
            r->max_bytes[a] += w * o.max_bytes[a];
        }
    }
    ctx_free(&c);
    if (rc == BP_ENOMEM) return bp_fail(err, rc, "out of memory");
    if (rc) return bp_fail(err, rc, "the pipeline simulation stalled");
    return BP_OK;
}

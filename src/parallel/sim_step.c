#include "parallel/sim_step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/real.h"
#include "parallel/buckets.h"
#include "parallel/sim_model.h"

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
    int W, V, T;        /* ranks, stream length N x M, sequence length */
    size_t act_floats;  /* the boundary activation of one micro-batch */
    stage_info *st;     /* [pp] */
    bp_sim_link pp_link, embed_link, world_link;
} ctx;

/* One step's figures, before averaging over the run. */
typedef struct step_out {
    double step_s, compute_s, bubble, peak;
    int stash;
    double exposed[BP_SIM_AXES], bytes[BP_SIM_AXES], max_bytes[BP_SIM_AXES];
} step_out;

static bool is_gradient_algo(int a) { return bp_dp_algo_kind(a) == BP_DP_GRADIENT; }

/* ---- messages -------------------------------------------------------------------- */

/* k messages of `bytes` that one rank posts at once (its link serializes them). */
static double burst_s(const bp_sim_link *l, int k, size_t bytes) {
    if (k <= 0) return 0;
    if (l->net.on) return k * (double)bytes * 8.0 / l->net.bw_bps + l->net.lat_s + l->wake_s;
    return l->msg_s + (l->copy_Bps > 0 ? k * (double)bytes / l->copy_Bps : 0) + l->wake_s;
}

static size_t minmax_bytes(size_t n) { return n ? n + 2 * sizeof(float) : 0; }

/* The all-to-all of C_LP_S: each rank posts p - 1 messages of `wire` bytes; with
 * `here` of the p ranks on each node, the node's link carries here x (p - here)
 * of them. */
static double alltoall_s(const ctx *c, const bp_sim_link *l, int p, int here, size_t wire) {
    double t = burst_s(l, p - 1, wire);
    const bp_sim_link *node = &c->m->inter;
    if (here > 1 && here < p && node->net.on)
        t = fmax(t, (double)here * (p - here) * (double)wire * 8.0 / node->net.bw_bps +
                        node->net.lat_s + node->wake_s);
    return t;
}

/* C_LP_S over p ranks (here of them per node) of n floats: encode, all-to-all of
 * the compressed chunks, decode and average its own chunk, encode it, ring
 * allgather, decode all. */
static double lp_allreduce_s(const ctx *c, const bp_sim_link *l, int p, int here, size_t n,
                             double *bytes) {
    if (p <= 1) return 0;
    size_t part = (n + (size_t)p - 1) / (size_t)p, wire = minmax_bytes(part);
    const bp_sim_machine *m = c->m;
    *bytes += 2.0 * (p - 1) * (double)wire;
    return bp_sim_minmax_s(m, n, true) + alltoall_s(c, l, p, here, wire) +
           bp_sim_minmax_s(m, part * (size_t)p, false) + bp_sim_vec_s(m, n) +
           bp_sim_minmax_s(m, part, true) + (p - 1) * bp_sim_message_s(l, wire) + l->wake_s +
           bp_sim_minmax_s(m, n, false);
}

static double ring_bytes(int p, size_t n) {
    return p > 1 ? 2.0 * (p - 1) * (double)((n + (size_t)p - 1) / (size_t)p) * sizeof(bp_real) : 0;
}

static double allreduce_s(const ctx *c, const bp_sim_link *l, int p, size_t n, double *bytes) {
    *bytes += ring_bytes(p, n);
    return bp_sim_ring_allreduce_s(c->m, l, p, n);
}

/* One PowerSGD batch of tensors t[0..k): P = M Q for the 2-D ones, one allreduce of
 * the P's and the 1-D tensors, orthogonalization, Q = M^T P, one allreduce of the
 * Q's, P Q^T and the error feedback. */
static double powersgd_s(const ctx *c, const bp_sim_link *l, int p, const bp_sim_tensor *t, int k,
                         int rank, double min_rate, double *bytes) {
    size_t Pn = 0, Qn = 0, n = 0;
    double flops = 0;
    for (int i = 0; i < k; i++) {
        n += t[i].numel;
        double r = rank < (int)t[i].rows && rank < (int)t[i].cols
                       ? rank
                       : (double)(t[i].rows < t[i].cols ? t[i].rows : t[i].cols);
        double rows = (double)t[i].rows, cols = (double)t[i].cols;
        /* parallel/dp/powersgd.c: only matrices the low rank shrinks min_rate times */
        if (rows > 1 && cols > 1 && (rows + cols) * r * min_rate < rows * cols) {
            Pn += t[i].rows * (size_t)r;
            Qn += t[i].cols * (size_t)r;
            flops += 6.0 * rows * cols * r + 2.0 * (rows + cols) * r * r;
        } else {
            Pn += t[i].numel;
        }
    }
    return bp_sim_matmul_s(c->m, flops) + bp_sim_vec_s(c->m, 2 * n) +
           allreduce_s(c, l, p, Pn, bytes) + (Qn ? allreduce_s(c, l, p, Qn, bytes) : 0);
}

/* ---- the stages -------------------------------------------------------------------- */

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
    int groups = (rpn < c->W ? rpn : c->W) / si->dp_m;
    if (groups > 1 && si->dp_link.net.on) si->dp_link.net.bw_bps /= groups;
    if (groups > 1 && si->dp_link.copy_Bps > 0) si->dp_link.copy_Bps /= groups;
}

/* Hierarchical: the reduction to the node's leader and the broadcast back, about
 * one allreduce within the node. *bytes, counted per rank as the mean over the
 * node's ranks, gets that and takes the leader's share of `leader_bytes` (what the
 * algorithm among the leaders sent). */
static double local_s(const ctx *c, const stage_info *si, size_t n, double leader_bytes,
                      double *bytes) {
    if (si->dp_p == c->j->dp) return 0;
    *bytes += ring_bytes(si->dp_m, n) - leader_bytes * (1.0 - 1.0 / si->dp_m);
    return bp_sim_ring_allreduce_s(c->m, &si->dp_local, si->dp_m, n);
}

static int stage_init(ctx *c, int s) {
    const bp_sim_job *j = c->j;
    const bp_model_config *mc = &j->mc;
    stage_info *si = &c->st[s];
    si->b0 = j->first[s], si->b1 = j->first[s + 1];
    si->nt = bp_sim_gpt_tensors(mc, j->tp, si->b0, si->b1, NULL);
    si->tens = malloc((size_t)si->nt * sizeof *si->tens);
    si->blk_bwd_s = calloc((size_t)(si->b1 - si->b0), sizeof(double));
    if (!si->tens || !si->blk_bwd_s) return BP_ENOMEM;
    bp_sim_gpt_tensors(mc, j->tp, si->b0, si->b1, si->tens);
    si->params = bp_sim_gpt_params(mc, j->tp, si->b0, si->b1);
    si->skip = -1;
    if (j->fused_embedding && j->pp > 1 && (s == 0 || s == j->pp - 1))
        si->skip = s == 0 ? 0 : si->nt - 1; /* wte, or the head's copy of it */
    bp_sim_link tp_link = bp_sim_group_link(c->m, rank_of(j, 0, s, 0), 1, j->tp, c->W);
    si->tp_s = bp_sim_ring_allreduce_s(c->m, &tp_link, j->tp, c->act_floats);
    for (int b = si->b0; b < si->b1; b++) {
        bool layer = b >= 1 && b <= mc->n_layer;
        double tp = layer && j->tp > 1 ? 2 * si->tp_s : 0;
        si->layers += layer;
        si->fwd_s += bp_sim_block_s(c->m, mc, j->tp, b, j->micro_B, c->T, false) + tp;
        si->blk_bwd_s[b - si->b0] = bp_sim_block_s(c->m, mc, j->tp, b, j->micro_B, c->T, true) + tp;
        si->bwd_s += si->blk_bwd_s[b - si->b0];
    }
    dp_links(c, s, si);
    return BP_OK;
}

/* Compressed backpropagation of stage s > 0: the wire of P and Q, and encoding
 * (two projections, the error's P Q^T and the receiver's P Q^T). */
static void cb_costs(const ctx *c, int s, bp_sim_stage *st) {
    const bp_sim_job *j = c->j;
    if (j->cb_rank <= 0 || s == 0) return;
    double rows = (double)j->micro_B * c->T, cols = (double)c->act_floats / rows;
    double r = j->cb_rank < rows && j->cb_rank < cols ? j->cb_rank : fmin(rows, cols);
    st->cb_sends = j->cb_epilogue_only ? j->pp - s : c->V;
    if (st->cb_sends > c->V) st->cb_sends = c->V;
    st->cb_bytes = (size_t)((rows + cols) * r) * sizeof(bp_real);
    st->cb_s = bp_sim_matmul_s(c->m, 8.0 * rows * cols * r) + bp_sim_vec_s(c->m, 2 * c->act_floats);
}

/* Steps of one pipeline stream (1: a flush every step). */
static int stream_steps(const bp_sim_job *j) { return j->stream_steps > 1 ? j->stream_steps : 1; }

/* One replica's tied embedding allreduce (first and last stages, or every replica's). */
static double embed_one_s(const ctx *c, double *bytes) {
    const bp_sim_job *j = c->j;
    if (j->pp <= 1) return 0;
    int ranks = j->fused_embedding ? 2 * j->dp : 2;
    return allreduce_s(c, &c->embed_link, ranks, (size_t)j->mc.vocab * j->mc.n_embd, bytes);
}

static int run_pipeline(const ctx *c, bp_sim_result *r, bp_sim_stage_result *per) {
    const bp_sim_job *j = c->j;
    bp_sim_stage *st = calloc((size_t)j->pp, sizeof *st);
    if (!st) return BP_ENOMEM;
    for (int s = 0; s < j->pp; s++) {
        double unused = 0;
        bool ends = s == 0 || s == j->pp - 1;
        st[s] = (bp_sim_stage){.fwd_s = c->st[s].fwd_s, .bwd_s = c->st[s].bwd_s,
                               .out_bytes = c->act_floats * sizeof(bp_real),
                               .upd_s = bp_sim_optim_s(c->m, c->st[s].params) +
                                        (ends ? embed_one_s(c, &unused) : 0)};
        cb_costs(c, s, &st[s]);
    }
    bp_sim_config sc = {.S = j->pp, .N = j->N, .M = j->M, .K = stream_steps(j), .tied = true,
                        .sched = j->sched, .stage = st, .link = c->pp_link};
    int rc = bp_sim_run(&sc, r, per);
    free(st);
    return rc;
}

/* ---- data parallelism -------------------------------------------------------------- */

typedef enum bucket_kind { B_NONE, B_ALLREDUCE, B_LP, B_POWERSGD } bucket_kind;

/* How stage s's gradient buckets travel in a step of the warm-up (warm) or after. */
static bucket_kind bucket_algo(const ctx *c, int s, bool warm, int *rank) {
    const bp_sim_job *j = c->j;
    int a = j->dpc.algo;
    *rank = j->dpc.rank;
    if (s < j->sc_stages) a = BP_DP_POWERSGD, *rank = j->sc_rank;
    if (a == BP_DP_ASYNC && warm) a = BP_DP_ALLREDUCE; /* --async-warmup */
    if (j->dp <= 1 || j->N > 1 || j->avgpipe || !is_gradient_algo(a)) return B_NONE;
    if (a == BP_DP_BYTEGRAD) return B_LP;
    if (a == BP_DP_POWERSGD && !warm) return B_POWERSGD;
    if (a == BP_DP_QADAM && !warm) return B_NONE;
    return B_ALLREDUCE;
}

/* When stage s's communication thread finishes its buckets, backward's last pass
 * having started at `start` and the stage's operations ending at `end`. */
static double buckets_end(const ctx *main, int s, bool warm, double start, double end,
                          double *bytes) {
    ctx comm = *main; /* the costs below run on the communication thread */
    comm.m = &main->comm_m;
    const ctx *c = &comm;
    const bp_sim_job *j = c->j;
    const stage_info *si = &c->st[s];
    int rank;
    bucket_kind k = bucket_algo(c, s, warm, &rank);
    if (k == B_NONE) return end;
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
        const bp_sim_link *l = &si->dp_link;
        int p = si->dp_p, here = p < j->dp ? 1 : si->dp_m;
        double b = 0;
        if (k == B_ALLREDUCE) t += allreduce_s(c, l, p, bk[i].len, &b);
        if (k == B_LP) t += lp_allreduce_s(c, l, p, here, bk[i].len, &b);
        if (k == B_POWERSGD)
            t += powersgd_s(c, l, p, si->tens + bk[i].first_tensor, bk[i].n_tensors, rank,
                            s < j->sc_stages ? 0 : j->dpc.powersgd_min_rate, &b);
        t += local_s(c, si, bk[i].len, b, &b);
        *bytes += b;
    }
    free(bt), free(bk);
    return fmax(t, end);
}

/* What the algorithm does after the optimizer on stage s, per step on average. */
static double mix_s(const ctx *c, int s, bool warm, double step_s, double hide_s,
                    double *bytes) {
    const bp_sim_job *j = c->j;
    const bp_sim_machine *m = c->m;
    const stage_info *si = &c->st[s];
    const bp_sim_link *l = &si->dp_link;
    size_t n = si->params;
    int p = si->dp_p, here = p < j->dp ? 1 : si->dp_m;
    double b = 0, t = 0, every = 1;
    bool overlapped = false; /* runs from the step's start, beside forward and backward */
    if (j->avgpipe) { /* each replica pulled to the center, then the centers averaged */
        t = j->N * bp_sim_vec_s(m, 3 * n) + bp_sim_vec_s(m, n) + allreduce_s(c, l, p, n, &b);
        every = (double)j->dpc.ea_period;
    } else if (p > 1 && s >= j->sc_stages) {
        switch (j->dpc.algo) {
        case BP_DP_DECENTRALIZED: /* Bagua's order hides it behind hide_s */
            every = (double)j->dpc.interval;
            overlapped = !j->dpc.step_first;
            if (j->dpc.peers == BP_PEERS_ALL) {
                t = allreduce_s(c, l, p, n, &b);
            } else {
                t = bp_sim_message_s(l, n * sizeof(bp_real)) + l->wake_s + bp_sim_vec_s(m, n);
                b = (double)n * sizeof(bp_real);
            }
            break;
        case BP_DP_LP_DECENTRALIZED:
            t = bp_sim_vec_s(m, 4 * n) + bp_sim_minmax_s(m, n, true) +
                burst_s(l, 2, minmax_bytes(n)) + bp_sim_minmax_s(m, 3 * n, false) +
                bp_sim_vec_s(m, 3 * n);
            b = 2.0 * (double)minmax_bytes(n);
            break;
        case BP_DP_EASGD:
            t = bp_sim_vec_s(m, 4 * n) + allreduce_s(c, l, p, n, &b);
            every = (double)j->dpc.ea_period;
            break;
        case BP_DP_QADAM:
            if (!warm) t = bp_sim_vec_s(m, n) + lp_allreduce_s(c, l, p, here, n, &b);
            break;
        case BP_DP_ASYNC: { /* its own thread: an allreduce every sync_ms */
            if (warm) break; /* --async-warmup: gradient buckets instead */
            double round = j->dpc.sync_ms * 1e-3 + bp_sim_ring_allreduce_s(m, l, p, n + 1);
            b = ring_bytes(p, n + 1) * step_s / round;
            every = 1;
            break;
        }
        default: break;
        }
    }
    if (t > 0) t += local_s(c, si, n, b, &b);
    if (overlapped) t = fmax(0, t - hide_s);
    *bytes += b / every;
    return t / every;
}

/* ---- one step ----------------------------------------------------------------------- */

static double peak_memory(const ctx *c, int s, int stash) {
    const bp_sim_job *j = c->j;
    double n = (double)c->st[s].params * sizeof(bp_real), extra = 0;
    int a = s < j->sc_stages ? BP_DP_POWERSGD : j->dpc.algo;
    if (j->avgpipe || a == BP_DP_EASGD) extra = 2 * n;
    else if (a == BP_DP_LP_DECENTRALIZED) extra = 3 * n + 0.5 * n;
    else if (a == BP_DP_POWERSGD) extra = n;
    else if (a == BP_DP_BYTEGRAD || a == BP_DP_QADAM) extra = 0.5 * n;
    if (j->dp <= 1 && !j->avgpipe) extra = 0;
    double act = (double)bp_sim_gpt_act_bytes(&j->mc, j->tp, c->st[s].b0, c->st[s].b1, j->micro_B,
                                              c->T);
    return j->N * n * (2 + j->optim_buffers) + extra + stash * act;
}

/* Bytes stage s sends to its pipeline neighbours in a step: every activation
 * forward and every gradient backward, less what compression saves. */
static double pp_bytes(const ctx *c, int s) {
    const bp_sim_job *j = c->j;
    double whole = (double)c->act_floats * sizeof(bp_real);
    bp_sim_stage st = {0};
    cb_costs(c, s, &st);
    return c->V * whole * ((s < j->pp - 1) + (s > 0)) -
           st.cb_sends * (whole - (double)st.cb_bytes);
}

/* The figures of stage s that do not depend on the others. */
static void stage_figures(const ctx *c, int s, double dp_bytes, const bp_sim_stage_result *per,
                          step_out *o) {
    const bp_sim_job *j = c->j;
    double tpb = j->tp > 1 ? 4.0 * c->st[s].layers * c->V * ring_bytes(j->tp, c->act_floats) : 0;
    double b[BP_SIM_AXES] = {dp_bytes, pp_bytes(c, s), tpb, 0};
    for (int a = 0; a < BP_SIM_AXES; a++) {
        o->max_bytes[a] = fmax(o->max_bytes[a], b[a]);
        o->bytes[a] += b[a] * j->dp * j->tp; /* every dp and tp rank of the stage alike */
    }
    o->peak = fmax(o->peak, peak_memory(c, s, per->peak_stash));
    if (per->peak_stash > o->stash) o->stash = per->peak_stash;
}

/* The collectives every rank waits for after its buckets: the tied embedding
 * (first and last stage, each replica in turn), the agreement on the step (2
 * floats over all ranks) and the gradient norm over tp and pp, the last two only
 * every --ea-period steps with local steps. From `ready`, when each stage's buckets
 * are done; *embed_end: when the embedding is in sync. */
static double end_of_backward(const ctx *c, const double *ready, double *embed_end, step_out *o) {
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
    /* a stream of K steps agrees once (K <= the period) */
    return t + (j->local_steps ? agree * stream_steps(j) / (double)j->dpc.ea_period : agree);
}

/* Optimizer steps of stage s's replicas (qadam's own after its warm-up). */
static double optim_s(const ctx *c, int s, bool warm) {
    const bp_sim_job *j = c->j;
    bool qadam = j->dpc.algo == BP_DP_QADAM && !warm && s >= j->sc_stages;
    return (qadam ? 1 : j->N) * bp_sim_optim_s(c->m, c->st[s].params);
}

static int one_step(const ctx *c, bool warm, step_out *o) {
    const bp_sim_job *j = c->j;
    int S = j->pp;
    bp_sim_result pr;
    bp_sim_stage_result *per = calloc((size_t)S, sizeof *per);
    double *ready = calloc((size_t)S, sizeof(double));
    int rc = per && ready ? run_pipeline(c, &pr, per) : BP_ENOMEM;
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
        double embed_end, sync = end_of_backward(c, ready, &embed_end, o), last = 0, mix0 = 0;
        for (int s = 0; s < S; s++) {
            double unused = 0, mix = K * mix_s(c, s, warm, 0, per[s].end_s, &unused);
            last = fmax(last, optim_s(c, s, warm) + mix);
            if (s == 0) mix0 = mix;
        }
        o->step_s = (sync + last) / K;
        for (int s = 0; s < S; s++) { /* async's bytes depend on the step's length */
            double mb = 0;
            mix_s(c, s, warm, o->step_s, per[s].end_s, &mb);
            o->bytes[BP_SIM_DP] += mb * j->dp * j->tp;
            o->max_bytes[BP_SIM_DP] = fmax(o->max_bytes[BP_SIM_DP], mb);
        }
        o->bubble = pr.bubble;
        o->exposed[BP_SIM_DP] = (ready[0] - per[0].end_s + mix0) / K;
        o->exposed[BP_SIM_PP] = per[0].idle_s / K;
        o->exposed[BP_SIM_TP] = j->tp > 1 ? 4.0 * c->st[0].layers * c->V * c->st[0].tp_s : 0;
        o->exposed[BP_SIM_EMBED] = S > 1 ? (embed_end - ready[0]) / K : 0;
        o->compute_s = o->step_s;
        for (int a = 0; a < BP_SIM_AXES; a++) o->compute_s -= o->exposed[a];
    }
    free(per);
    free(ready);
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

static int ctx_init(ctx *c, const bp_sim_job *j, const bp_sim_machine *m) {
    *c = (ctx){.j = j, .m = m, .W = j->dp * j->pp * j->tp, .V = j->N * j->M, .T = j->mc.seq_len};
    c->act_floats = (size_t)j->micro_B * (size_t)c->T * (size_t)j->mc.n_embd;
    c->pp_link = bp_sim_group_link(m, 0, j->dp * j->tp, j->pp, c->W);
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
    int rc = BP_OK;
    for (int s = 0; rc == BP_OK && s < j->pp; s++) rc = stage_init(c, s);
    return rc;
}

/* Steps of the run with full-precision gradients first (qadam, powersgd, async,
 * --sc-stages), at most the run. */
static int64_t warm_steps(const bp_sim_job *j) {
    int64_t w = 0;
    if (j->sc_stages > 0) w = j->sc_warmup;
    else if (j->dpc.algo == BP_DP_QADAM) w = j->dpc.qadam_warmup;
    else if (j->dpc.algo == BP_DP_POWERSGD) w = j->dpc.powersgd_warmup;
    else if (j->dpc.algo == BP_DP_ASYNC) w = j->dpc.async_warmup;
    return w < j->steps ? w : j->steps;
}

bp_status bp_sim_step(const bp_sim_job *j, const bp_sim_machine *m, bp_sim_step_result *r, bp_err *err) {
    memset(r, 0, sizeof *r);
    if (j->mc.kind != BP_MODEL_GPT)
        return bp_fail(err, BP_EUSAGE, "option --model: simulate models gpt only");
    ctx c;
    int rc = ctx_init(&c, j, m);
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

/* The step simulator (plan/sim_step.c) and its analytic model
 * (plan/sim_model.c) on cases with closed forms.
 *
 *  - The analytic gpt has the tensors bp_model_create_tp lays out (count, order,
 *    shard sizes, owning block, the head's tied copy) and the activation bytes
 *    bp_acts_create allocates, for several ranges and tp sizes; so has the mlp
 *    (no tied copy, a boundary width per block).
 *  - Stages measured whole (tune's profile) replace the machine's blocks: an mlp's
 *    two stages on a link of 1 byte per microsecond take their forward and
 *    backward, the two boundary messages of the mlp's width, the optimizer and
 *    the two agreements, and no tied tensor's allreduce.
 *  - One bucket's allreduce over a ring of n ranks on an emulated link is exposed
 *    for exactly 2 (n-1)/n x bytes / bw + 2 (n-1) lat, and sends that many bytes;
 *    where ranks poll (an emulated device), 2 (n-1) wake-ups more, else one.
 *  - With a fast link buckets hide behind backward: only those ready when backward
 *    ends are exposed; without overlap all are.
 *  - bytegrad sends about 4x fewer bytes than allreduce (one byte per float plus
 *    a header per chunk).
 *  - gpipe on equal stages with free messages idles (S-1)/(M+S-1) of the time.
 *  - Each transformer block's 4 tp allreduces are rank 0's exposed tp time; where
 *    ranks poll, each takes at least its messages' hand-overs.
 *  - Per-pair links (--net): no group shares a node's card.
 *  - Hierarchical: a binomial reduction within the node and broadcast back, plus a
 *    ring among the node leaders;
 *    flat over two nodes, a ring that waits on the slow link.
 *  - Links measured per group: on a dp 2 x pp 2 grid whose dp pairs are slow and
 *    whose pipeline pairs are fast, the dp buckets' ring is charged at the dp
 *    link and the pipeline's messages at the pp link, not at the level's.
 *  - More bandwidth is never slower, for every algorithm, grid and schedule.
 *  - Every algorithm of the registry declares its cost in its own file, and the
 *    simulator takes it from there: each sends data-parallel bytes on 4 ranks, and a
 *    declaration removed leaves them at zero. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "nn/model.h"
#include "parallel/buckets.h"
#include "parallel/dp/algo.h"
#include "parallel/dp/async.h"
#include "parallel/dp/decentralized.h"
#include "parallel/dp/easgd.h"
#include "parallel/dp/powersgd.h"
#include "parallel/dp/qadam.h"
#include "plan/sim_machine.h"
#include "plan/sim_model.h"
#include "plan/sim_step.h"

#define assert_near(a, b, tol) assert_near_at((a), (b), (tol), __FILE__, __LINE__)
static void assert_near_at(double a, double b, double tol, const char *file, int line) {
    if (fabs(a - b) <= tol) return;
    print_error("%s:%d: %.12g != %.12g (tolerance %g)\n", file, line, a, b, tol);
    fail();
}

static bp_model_config gpt(int L, int C, int H, int T, int V) {
    return (bp_model_config){.kind = BP_MODEL_GPT, .vocab = V, .n_layer = L, .n_embd = C,
                             .n_head = H, .seq_len = T};
}

static bp_status noop_sum(void *ctx, bp_real *x, size_t n) {
    (void)ctx, (void)x, (void)n;
    return BP_OK;
}

static void test_tensors_match_the_model(void **state) {
    (void)state;
    bp_model_config mc = gpt(3, 16, 4, 8, 32);
    const int ranges[][2] = {{0, 5}, {0, 2}, {1, 4}, {2, 5}, {4, 5}, {0, 1}};
    for (int tp = 1; tp <= 4; tp *= 2)
        for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
            int b0 = ranges[r][0], b1 = ranges[r][1];
            bp_tp t = {.rank = 0, .size = tp, .allreduce_sum = noop_sum};
            bp_model *m;
            bp_err err;
            assert_int_equal(bp_model_create_tp(&mc, b0, b1, &t, &m, &err), BP_OK);
            int n = bp_sim_model_tensors(&mc, tp, b0, b1, NULL);
            assert_int_equal(n, bp_model_num_tensors(m));
            bp_sim_tensor *st = malloc((size_t)n * sizeof *st);
            bp_sim_model_tensors(&mc, tp, b0, b1, st);
            for (int i = 0; i < n; i++) {
                const bp_tensor_info *ti = bp_model_tensor(m, i);
                assert_int_equal(st[i].numel, ti->numel);
                assert_int_equal(st[i].block, ti->block);
                assert_int_equal(st[i].rows, ti->shape[0]);
                assert_int_equal(st[i].cols, ti->ndim == 2 ? (size_t)ti->shape[1] : 0);
            }
            assert_int_equal(bp_sim_model_params(&mc, tp, b0, b1), bp_model_num_params(m));
            bp_acts *a;
            assert_int_equal(bp_acts_create(m, 3, 8, &a, &err), BP_OK);
            assert_int_equal(bp_sim_act_bytes(&mc, tp, b0, b1, 3, 8), bp_acts_bytes(a));
            bp_acts_destroy(a);
            free(st);
            bp_model_destroy(m);
        }
}

/* The same for an mlp, whose widths differ from block to block. */
static void test_mlp_tensors_match_the_model(void **state) {
    (void)state;
    bp_model_config mc;
    bp_model_config_init(&mc, BP_MODEL_MLP);
    mc.in_dim = 12, mc.hidden = 8, mc.n_hidden = 3, mc.n_class = 5;
    const int ranges[][2] = {{0, 4}, {0, 1}, {1, 3}, {2, 4}, {3, 4}};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        int b0 = ranges[r][0], b1 = ranges[r][1];
        bp_model *m;
        bp_err err;
        assert_int_equal(bp_model_create(&mc, b0, b1, &m, &err), BP_OK);
        int n = bp_sim_model_tensors(&mc, 1, b0, b1, NULL);
        assert_int_equal(n, bp_model_num_tensors(m));
        bp_sim_tensor st[16];
        bp_sim_model_tensors(&mc, 1, b0, b1, st);
        for (int i = 0; i < n; i++) {
            assert_int_equal(st[i].numel, bp_model_tensor(m, i)->numel);
            assert_int_equal(st[i].block, bp_model_tensor(m, i)->block);
        }
        assert_int_equal(bp_sim_model_params(&mc, 1, b0, b1), bp_model_num_params(m));
        bp_acts *a;
        assert_int_equal(bp_acts_create(m, 3, 1, &a, &err), BP_OK);
        assert_int_equal(bp_sim_act_bytes(&mc, 1, b0, b1, 3, 1), bp_acts_bytes(a));
        bp_acts_destroy(a);
        bp_model_destroy(m);
    }
    assert_int_equal(bp_sim_tied_numel(&mc), 0);
}

/* A device so fast that computation and memory passes take no time worth
 * counting, on one node whose link is the emulated network `bw`, `lat`. */
static bp_sim_machine fast_machine(double bw, double lat) {
    bp_sim_link l = {.net = {.on = true, .bw_bps = bw, .lat_s = lat}};
    return (bp_sim_machine){.flops = 1e30, .mem_Bps = 1e30, .efficiency = 1, .intra = l,
                            .inter = l};
}

typedef struct job_parts {
    int first[17];
    bp_sim_job j;
} job_parts;

/* dp x pp x tp of a gpt, allreduce in one bucket, 1f1b, M micro-batches. */
static void make_job(job_parts *p, bp_model_config mc, int dp, int pp, int tp, int M) {
    int n = mc.n_layer + 2;
    for (int s = 0; s <= pp; s++) p->first[s] = s * n / pp;
    p->j = (bp_sim_job){.mc = mc, .dp = dp, .pp = pp, .tp = tp, .N = 1, .M = M, .micro_B = 2,
                        .sched = {BP_SCHED_1F1B, 0}, .first = p->first, .steps = 100,
                        .optim_buffers = 2};
    p->j.dpc = (bp_dp_config){.algo = BP_DP_ALLREDUCE, .bucket_mb = 1e6, .overlap = true};
    bp_dp_settings *st = &p->j.dpc.settings;
    *bp_decentralized_in(st) = (bp_decentralized_settings){.interval = 1};
    *bp_easgd_in(st) = (bp_easgd_settings){.alpha = 0.5, .period = 1};
    *bp_async_in(st) = (bp_async_settings){.sync_ms = 10, .agree_every = 1};
    *bp_powersgd_in(st) = (bp_powersgd_settings){.rank = 2};
}

static bp_sim_step_result simulate(const bp_sim_job *j, const bp_sim_machine *m) {
    bp_sim_step_result r;
    bp_err err;
    assert_int_equal(bp_sim_step(j, m, &r, &err), BP_OK);
    return r;
}

static void test_measured_stages(void **state) {
    (void)state;
    bp_model_config mc;
    bp_model_config_init(&mc, BP_MODEL_MLP);
    mc.in_dim = 12, mc.hidden = 8, mc.n_hidden = 3, mc.n_class = 5;
    job_parts p;
    make_job(&p, mc, 1, 2, 1, 1);
    p.first[1] = 2, p.first[2] = 4;
    bp_sim_stage st[2] = {{.fwd_s = 1e-3, .bwd_s = 3e-3, .update_s = 5e-4, .act_bytes = 100,
                           .replica_bytes = 1000},
                          {.fwd_s = 2e-3, .bwd_s = 4e-3, .update_s = 6e-4, .act_bytes = 10,
                           .replica_bytes = 3000}};
    p.j.measured = st;
    bp_sim_machine m = fast_machine(8e6, 0); /* a byte per microsecond */
    bp_sim_step_result r = simulate(&p.j, &m);
    /* F0 F1 B1 B0, the activation and its gradient of micro_B x hidden floats, the
     * slower optimizer, the gradient norm (1 float) and the agreement (2 floats)
     * over 2 ranks: 2 messages each of half their bytes. */
    double msg = 2 * 8 * 4e-6;
    assert_near(r.step_s, 10e-3 + 2 * msg + 6e-4 + 2 * 2e-6 + 2 * 4e-6, 1e-9);
    assert_near(r.bytes[BP_SIM_EMBED], 0, 0);
    assert_near(r.peak_bytes, 3000 + 10, 0);
}

/* Groups of neighbours one rank apart (the dp groups of a dp x pp grid with tp 1)
 * on a slow link; others (the pipeline's, stride dp) on a fast one. */
static bp_sim_link axis_link(const void *ctx, int first, int stride, int size) {
    (void)ctx, (void)first, (void)size;
    bp_sim_link l = {.net = {.on = true, .bw_bps = 1e12, .lat_s = 1e-6}};
    if (stride == 1) l.net = (bp_net){.on = true, .bw_bps = 1e8, .lat_s = 2e-3};
    return l;
}

static void test_links_per_axis(void **state) {
    (void)state;
    bp_model_config mc = gpt(2, 64, 4, 16, 64);
    job_parts p;
    make_job(&p, mc, 2, 2, 1, 1);
    bp_sim_machine m = fast_machine(1e10, 1e-4);
    m.measured = axis_link;
    bp_sim_step_result r = simulate(&p.j, &m);
    /* stage 0's one bucket: a ring of 2 at 100 Mbit/s, 2 ms */
    double bytes = (double)bp_sim_model_params(&mc, 1, 0, 2) * sizeof(float);
    assert_near(r.exposed_s[BP_SIM_DP], bytes * 8 / 1e8 + 2 * 2e-3, 1e-9);
    /* the pipeline waits on messages of the fast link: a few microseconds */
    assert_true(r.exposed_s[BP_SIM_PP] < 1e-4);
    m.measured = NULL; /* the level's link (100 us) everywhere */
    bp_sim_step_result flat = simulate(&p.j, &m);
    assert_true(flat.exposed_s[BP_SIM_PP] >= 2e-4 && flat.exposed_s[BP_SIM_DP] < 1e-3);
}

static void test_ring_allreduce_closed_form(void **state) {
    (void)state;
    const double bw = 1e9, lat = 1e-3;
    bp_model_config mc = gpt(2, 64, 4, 16, 64);
    for (int n = 2; n <= 8; n *= 2) {
        job_parts p;
        make_job(&p, mc, n, 1, 1, 1);
        bp_sim_machine m = fast_machine(bw, lat);
        bp_sim_step_result r = simulate(&p.j, &m);
        double bytes = (double)bp_sim_model_params(&mc, 1, 0, 4) * sizeof(float);
        /* every part is a whole number of floats: params divide by n here */
        double want = 2.0 * (n - 1) / n * bytes * 8 / bw + 2.0 * (n - 1) * lat;
        assert_near(r.exposed_s[BP_SIM_DP], want, 1e-9);
        assert_near(r.max_bytes[BP_SIM_DP], 2.0 * (n - 1) / n * bytes, 0.5);
        assert_near(r.bytes[BP_SIM_DP], n * 2.0 * (n - 1) / n * bytes, 0.5 * n);
    }
}

/* Where waiting ranks poll (an emulated device's run), each of the ring's 2 (n-1)
 * exchanges is seen wake_s late; elsewhere a collective pays it once. */
static void test_polling_ring_waits_at_every_exchange(void **state) {
    (void)state;
    const double bw = 1e9, lat = 1e-3, wake = 25e-6;
    bp_model_config mc = gpt(2, 64, 4, 16, 64);
    for (int n = 2; n <= 8; n *= 2) {
        job_parts p;
        make_job(&p, mc, n, 1, 1, 1);
        bp_sim_machine m = fast_machine(bw, lat);
        double none = simulate(&p.j, &m).exposed_s[BP_SIM_DP];
        m.intra.wake_s = m.inter.wake_s = wake;
        assert_near(simulate(&p.j, &m).exposed_s[BP_SIM_DP] - none, wake, 1e-9);
        m.polls = true;
        assert_near(simulate(&p.j, &m).exposed_s[BP_SIM_DP] - none, 2.0 * (n - 1) * wake, 1e-9);
    }
}

/* On a device with a host link (an emulated GPU), comm/ stages every collective's
 * buffer through the host: a copy there and one back, each a launch plus its bytes
 * at the link's rate, on top of the ring. */
static void test_device_collective_staged_through_host(void **state) {
    (void)state;
    const double bw = 1e9, lat = 1e-3, host = 4e9, launch = 5e-6;
    bp_model_config mc = gpt(2, 64, 4, 16, 64);
    job_parts p;
    make_job(&p, mc, 2, 1, 1, 1);
    bp_sim_machine m = fast_machine(bw, lat);
    m.launch_s = launch;
    double plain = simulate(&p.j, &m).exposed_s[BP_SIM_DP];
    m.host_Bps = host;
    double staged = simulate(&p.j, &m).exposed_s[BP_SIM_DP];
    double bytes = (double)bp_sim_model_params(&mc, 1, 0, 4) * sizeof(float);
    assert_near(staged - plain, 2.0 * (launch + bytes / host), 1e-9);
}

/* On a device with a host link, a pipeline's message is copied to the host before
 * it is sent and to the device after it arrived: gpipe on 2 stages of one
 * micro-batch waits for the activation and the gradient, each two copies longer. */
static void test_pipeline_message_staged_through_host(void **state) {
    (void)state;
    const double host = 1e9;
    job_parts p;
    make_job(&p, gpt(2, 64, 4, 16, 64), 1, 2, 1, 1);
    p.j.sched = (bp_schedule){BP_SCHED_GPIPE, 0};
    bp_sim_machine m = fast_machine(1e9, 1e-4);
    double plain = simulate(&p.j, &m).step_s;
    m.intra.host_Bps = m.inter.host_Bps = host;
    double staged = simulate(&p.j, &m).step_s;
    double act = p.j.micro_B * 16.0 * 64 * sizeof(float); /* micro_B samples of T 16, C 64 */
    assert_near(staged - plain, 2.0 * 2.0 * act / host, 1e-12);
}

/* AvgPipe's local steps (parallel/step.h) leave the agreement (2 floats over all
 * ranks) and the gradient norm (N floats over the stages) to one step in
 * --ea-period: the mean step is shorter by (1 - 1/tau) of those two ring
 * allreduces, each 2 (n-1) latencies and 2 (n-1)/n of its bytes on 2 ranks. */
static void test_avgpipe_local_steps(void **state) {
    (void)state;
    const double bw = 1e9, lat = 1e-3;
    job_parts p;
    make_job(&p, gpt(2, 64, 4, 16, 64), 1, 2, 1, 2);
    p.j.avgpipe = true;
    p.j.N = 2;
    bp_easgd_in(&p.j.dpc.settings)->period = 4;
    bp_sim_machine m = fast_machine(bw, lat);
    bp_sim_step_result every = simulate(&p.j, &m);
    p.j.local_steps = true;
    bp_sim_step_result local = simulate(&p.j, &m);
    double ring = 2 * lat + 8.0 * 8 / bw; /* 2 floats, and N = 2 floats, on 2 ranks */
    assert_near(every.step_s - local.step_s, 0.75 * 2 * ring, 1e-9);
}

/* Seconds of the ring allreduces of the buckets of the whole model that are ready
 * only once backward reaches block 1 (the embedding's backward takes no time on
 * the test's machine, so these wait until backward ends). */
static double last_buckets_s(const bp_sim_job *j, double bw, double lat) {
    int n = bp_sim_model_tensors(&j->mc, 1, 0, j->mc.n_layer + 2, NULL);
    bp_sim_tensor *t = malloc((size_t)n * sizeof *t);
    bp_bucket_tensor *bt = malloc((size_t)n * sizeof *bt);
    bp_bucket *b = malloc((size_t)n * sizeof *b);
    bp_sim_model_tensors(&j->mc, 1, 0, j->mc.n_layer + 2, t);
    size_t off = 0;
    for (int i = 0; i < n; i++) bt[i] = (bp_bucket_tensor){off, t[i].numel, t[i].block}, off += t[i].numel;
    int k = bp_buckets_plan(bt, n, (size_t)(j->dpc.bucket_mb * 1048576.0), -1, b);
    assert_true(k > 2);
    int p = j->dp;
    double s = 0;
    for (int i = 0; i < k; i++) {
        size_t part = (b[i].len + (size_t)p - 1) / (size_t)p;
        if (b[i].min_block <= 1) s += 2.0 * (p - 1) * (part * 4.0 * 8 / bw + lat);
    }
    assert_true(b[0].min_block > 1); /* some buckets do overlap */
    free(t), free(bt), free(b);
    return s;
}

static void test_overlap_hides_all_but_the_last_bucket(void **state) {
    (void)state;
    const double bw = 1e12, lat = 1e-6;
    job_parts p;
    make_job(&p, gpt(6, 256, 4, 64, 256), 4, 1, 1, 1);
    p.j.dpc.bucket_mb = 0.5;
    /* Computation that backward spends long enough on to hide every bucket. */
    bp_sim_machine m = fast_machine(bw, lat);
    m.flops = 1e9;
    bp_sim_step_result r = simulate(&p.j, &m);
    assert_near(r.exposed_s[BP_SIM_DP], last_buckets_s(&p.j, bw, lat), 1e-9);
    p.j.dpc.overlap = false;
    bp_sim_step_result all = simulate(&p.j, &m);
    assert_true(all.exposed_s[BP_SIM_DP] > 3 * r.exposed_s[BP_SIM_DP]);
    assert_near(all.step_s - r.step_s, all.exposed_s[BP_SIM_DP] - r.exposed_s[BP_SIM_DP], 1e-9);
}

/* qadam after warm-up with early updates (no clipping, one stage: the engine's
 * dp->early) sends each bucket's momentum on the communication thread as bytegrad
 * sends its gradient, so on a device whose passes cost nothing both expose the
 * same; without early updates the momentum goes after backward, in one piece. */
static void test_qadam_early_momentum_goes_by_bucket(void **state) {
    (void)state;
    job_parts p;
    make_job(&p, gpt(2, 128, 4, 16, 256), 4, 1, 1, 1);
    p.j.dpc.bucket_mb = 0.1;
    bp_sim_machine m = fast_machine(1e9, 1e-4);
    p.j.dpc.algo = BP_DP_BYTEGRAD;
    bp_sim_step_result by_bucket = simulate(&p.j, &m);
    p.j.dpc.algo = BP_DP_QADAM;
    p.j.dpc.early_update = true;
    bp_sim_step_result early = simulate(&p.j, &m);
    assert_near(early.exposed_s[BP_SIM_DP], by_bucket.exposed_s[BP_SIM_DP], 1e-12);
    p.j.dpc.early_update = false;
    bp_sim_step_result late = simulate(&p.j, &m);
    assert_true(fabs(late.exposed_s[BP_SIM_DP] - by_bucket.exposed_s[BP_SIM_DP]) > 1e-6);
}

static void test_bytegrad_sends_a_quarter(void **state) {
    (void)state;
    for (int n = 2; n <= 8; n *= 2) {
        job_parts p;
        make_job(&p, gpt(2, 128, 4, 16, 256), n, 1, 1, 1);
        bp_sim_machine m = fast_machine(1e9, 1e-4);
        double full = simulate(&p.j, &m).bytes[BP_SIM_DP];
        p.j.dpc.algo = BP_DP_BYTEGRAD;
        bp_sim_step_result r = simulate(&p.j, &m);
        double ratio = r.bytes[BP_SIM_DP] / full;
        assert_true(ratio >= 0.25 && ratio < 0.2501);
        assert_true(r.exposed_s[BP_SIM_DP] > 0);
    }
}

static void test_every_algorithm_declares_its_cost(void **state) {
    (void)state;
    job_parts p;
    make_job(&p, gpt(2, 128, 4, 16, 256), 4, 1, 1, 1);
    bp_sim_machine m = fast_machine(1e9, 1e-4);
    for (int a = 0; a < BP_DP_N_CHOICES; a++) {
        const bp_dp_algo_ops *ops = bp_dp_ops(a);
        assert_non_null(ops);
        assert_true(ops->cost.bucket || ops->cost.step);
        p.j.dpc.algo = a;
        bp_dp_settings *st = &p.j.dpc.settings;
        bp_async_in(st)->warmup = bp_qadam_in(st)->warmup = bp_powersgd_in(st)->warmup = 0;
        if (a == BP_DP_ASYNC) bp_async_in(&p.j.dpc.settings)->sync_ms = 1;
        bp_sim_step_result r = simulate(&p.j, &m);
        if (!(r.bytes[BP_SIM_DP] > 0)) print_error("%s sends no dp bytes\n", bp_dp_algo_name(a));
        assert_true(r.bytes[BP_SIM_DP] > 0);
    }
}

static void test_gpipe_bubble(void **state) {
    (void)state;
    for (int S = 2; S <= 4; S++)
        for (int M = 1; M <= 8; M *= 2) {
            job_parts p;
            /* One layer per stage; the embedding and the head cost next to nothing
             * (vocabulary 1, bandwidth unlimited) and share the ends' stages. */
            make_job(&p, gpt(S, 256, 4, 32, 1), 1, S, 1, M);
            for (int s = 1; s < S; s++) p.first[s] = s + 1;
            p.j.sched = (bp_schedule){BP_SCHED_GPIPE, 0};
            bp_sim_machine m = fast_machine(1e30, 0);
            m.flops = 1e10;
            bp_sim_step_result r = simulate(&p.j, &m);
            /* the head's V = 1 products make the last stage 1/(12 C) slower */
            assert_near(r.bubble, (double)(S - 1) / (M + S - 1), 1e-3);
        }
}

static void test_tp_allreduces(void **state) {
    (void)state;
    const double bw = 1e9, lat = 1e-4;
    job_parts p;
    bp_model_config mc = gpt(3, 64, 4, 16, 64);
    make_job(&p, mc, 1, 1, 2, 3);
    bp_sim_machine m = fast_machine(bw, lat);
    bp_sim_step_result r = simulate(&p.j, &m);
    double bytes = 2.0 * 16 * 64 * sizeof(float); /* B x T x C */
    double one = 2.0 * (2 - 1) / 2 * bytes * 8 / bw + 2.0 * lat;
    assert_near(r.exposed_s[BP_SIM_TP], 4 * 3 * 3 * one, 1e-9); /* 4 per block, 3 blocks, M 3 */
    /* what is not tp: the end of step's agreement (8 bytes) and gradient norm (4
     * bytes) over the 2 ranks, two exchanges of half of them each */
    assert_near(r.compute_s, 2 * (4.0 * 8 / bw + lat) + 2 * (2.0 * 8 / bw + lat), 1e-12);
}

/* Where ranks poll, an exchange takes at least its messages' hand-overs (comm/'s
 * stamp, then MPI's rendezvous above its eager limit: 3 intervals a message, 1 up
 * to it), the reduce-scatter's in segments of BP_RING_SEGMENT_FLOATS one after
 * another: tp 2's activations of 2 x 512 x 256 floats on a link too fast to count
 * are a reduce-scatter of 2 segments and an allgather of 1 message, 9 intervals
 * each; a model of 8 floats of boundary, an eager message: 1 interval each way. */
static void test_tp_allreduces_wait_for_handovers(void **state) {
    (void)state;
    const double poll = 40e-6;
    job_parts p;
    bp_model_config mc = gpt(2, 256, 4, 512, 64);
    make_job(&p, mc, 1, 1, 2, 1);
    bp_sim_machine m = fast_machine(1e15, 0);
    m.polls = true;
    m.intra.wake_s = m.inter.wake_s = poll / 2;
    m.intra.poll_s = m.inter.poll_s = poll;
    assert_near(simulate(&p.j, &m).exposed_s[BP_SIM_TP], 4 * 2 * 9 * poll, 1e-9);
    p.j.mc = gpt(2, 8, 2, 512, 64); /* 2 x 512 x 8 floats: 16 KiB a part */
    assert_near(simulate(&p.j, &m).exposed_s[BP_SIM_TP], 4 * 2 * 2 * poll, 1e-9);
}

/* comm/'s --net gives every pair of ranks its own link: a group spanning nodes
 * shares no node's card (tp 2 x dp 2, one tp pair per node: each dp ring at the
 * whole bandwidth), where one card per node halves it for the node's two rings. */
static void test_per_pair_links_share_no_card(void **state) {
    (void)state;
    const double bw = 1e9, lat = 1e-4;
    bp_model_config mc = gpt(2, 64, 4, 16, 64);
    job_parts p;
    make_job(&p, mc, 2, 1, 2, 1);
    bp_sim_machine m = fast_machine(bw, lat);
    m.ranks_per_node = 2;
    bp_sim_link card = bp_sim_group_link(&m, 0, 2, 2, 4);
    assert_near(card.net.bw_bps, bw / 2, 1e-3);
    double shared = simulate(&p.j, &m).exposed_s[BP_SIM_DP];
    m.per_pair = true;
    bp_sim_link own = bp_sim_group_link(&m, 0, 2, 2, 4);
    assert_near(own.net.bw_bps, bw, 1e-3);
    double bytes = (double)bp_sim_model_params(&mc, 2, 0, 4) * sizeof(float);
    assert_near(shared - simulate(&p.j, &m).exposed_s[BP_SIM_DP], bytes * 8 / bw, 1e-9);
}

/* Hierarchical over 2 nodes of 4: one bucket is the reduction to the node's leader
 * and the broadcast back, binomial trees of 2 levels of whole messages (comm/prim.c),
 * plus the ring among the 2 leaders on the link between nodes. */
static void test_hierarchical_closed_form(void **state) {
    (void)state;
    const double bw_in = 1e11, lat_in = 1e-6, bw_out = 1e9, lat_out = 1e-4;
    bp_model_config mc = gpt(2, 64, 4, 16, 64);
    job_parts p;
    make_job(&p, mc, 8, 1, 1, 1);
    p.j.dpc.hierarchical = true;
    bp_sim_machine m = fast_machine(bw_in, lat_in);
    m.inter.net = (bp_net){.on = true, .bw_bps = bw_out, .lat_s = lat_out};
    m.ranks_per_node = 4;
    double bytes = (double)bp_sim_model_params(&mc, 1, 0, 4) * sizeof(float);
    double local = 2.0 * 2 * (bytes * 8 / bw_in + lat_in);
    double leaders = 2.0 * 1 / 2 * bytes * 8 / bw_out + 2.0 * lat_out;
    assert_near(simulate(&p.j, &m).exposed_s[BP_SIM_DP], local + leaders, 1e-9);
    p.j.dpc.hierarchical = false; /* a flat ring waits on the slow link at every exchange */
    double flat = 2.0 * 7 / 8 * bytes * 8 / bw_out + 2.0 * 7 * lat_out;
    assert_near(simulate(&p.j, &m).exposed_s[BP_SIM_DP], flat, 1e-9);
}

/* decentralized in Bagua's order runs its exchange beside forward and backward:
 * shorter than them, it costs the step nothing (as async's thread on host memory); longer, only the rest is exposed; step-first exposes all of it. */
static void test_decentralized_hides_its_exchange(void **state) {
    (void)state;
    for (int slow = 0; slow < 2; slow++) {
        job_parts p;
        make_job(&p, gpt(4, 128, 4, 64, 256), 2, 1, 1, 1);
        bp_sim_machine m = fast_machine(slow ? 1e8 : 1e12, 1e-5);
        m.flops = 1e10; /* forward and backward take milliseconds */
        m.mem_Bps = 1e11;
        p.j.dpc.algo = BP_DP_ASYNC; /* less the agreement's wait behind its rounds */
        bp_sim_step_result r = simulate(&p.j, &m);
        double none = r.step_s - r.exposed_s[BP_SIM_DP];
        p.j.dpc.algo = BP_DP_DECENTRALIZED;
        bp_decentralized_in(&p.j.dpc.settings)->interval = 1;
        double bagua = simulate(&p.j, &m).step_s;
        bp_decentralized_in(&p.j.dpc.settings)->order = BP_DECENTRALIZED_STEP_FIRST;
        double first = simulate(&p.j, &m).step_s;
        assert_true(first > bagua * (1 + 1e-9));
        if (slow)
            assert_true(bagua > none * (1 + 1e-9));
        else
            assert_near(bagua, none, 1e-12);
    }
}

/* decentralized's exchange on a device stages the weights (comm/memory.c): a copy to
 * the host and the average back, whole, on top of an exchange already exposed. */
static void test_decentralized_stages_its_weights_on_a_device(void **state) {
    (void)state;
    job_parts p;
    make_job(&p, gpt(4, 128, 4, 64, 256), 2, 1, 1, 1);
    p.j.dpc.algo = BP_DP_DECENTRALIZED;
    bp_decentralized_in(&p.j.dpc.settings)->interval = 1;
    bp_sim_machine m = fast_machine(1e7, 1e-5); /* the exchange outlasts the step */
    m.flops = 1e10;
    double n = (double)bp_sim_model_params(&p.j.mc, 1, 0, p.j.mc.n_layer + 2);
    double host = simulate(&p.j, &m).step_s;
    m.host_Bps = 1e9;
    double device = simulate(&p.j, &m).step_s;
    assert_near(device - host, 2 * n * sizeof(float) / 1e9, 1e-7); /* and the agreement's */
}

/* async's round, on a device, holds the step off by three copies of the weights over
 * the host link (comm/async.c), once a round; a round takes the step's lock at step
 * boundaries, so it spans whole steps: 2 when its transfer and interval are shorter
 * than a step, 1 + ceil((2 copies + interval) / step) with a longer interval; on host
 * memory, nothing. */
static void test_async_holds_the_step_for_its_host_copies(void **state) {
    (void)state;
    job_parts p;
    make_job(&p, gpt(4, 128, 4, 64, 256), 2, 1, 1, 1);
    p.j.dpc.algo = BP_DP_ASYNC;
    bp_async_in(&p.j.dpc.settings)->warmup = 0;
    bp_sim_machine m = fast_machine(1e15, 1e-6); /* no wait behind the rounds' transfers */
    m.flops = 1e10; /* a step of tens of milliseconds */
    double n = (double)bp_sim_model_params(&p.j.mc, 1, 0, p.j.mc.n_layer + 2);
    double copy = n * sizeof(float) / 1e9;
    for (int slow = 0; slow < 2; slow++) {
        double sync = slow ? 10.0 : 1e-3;
        bp_async_in(&p.j.dpc.settings)->sync_ms = (int)(sync * 1e3);
        m.host_Bps = 0;
        double base = simulate(&p.j, &m).step_s;
        m.host_Bps = 1e9;
        double t = simulate(&p.j, &m).step_s;
        assert_true(2 * copy + sync > base || !slow);
        assert_true(copy < base);
        double steps = 1 + (slow ? ceil((2 * copy + sync) / base) : 1);
        assert_near(t, base + 3 * copy / steps, 1e-7);
    }
}

/* async's agreement, at its meetings every agree_every steps, queues behind the
 * round's message on the wire (comm/async.c keeps the links busy while a round's
 * allreduce runs, here all but the steps it waits for the lock): half that message's
 * transfer per round of the agreement that rides the ring's connections, from a rank
 * to the next: both of its rounds on 2 ranks, the broadcast's last on 4; nothing of it
 * on a link that transfers at once. */
static void test_async_agreement_queues_behind_its_rounds(void **state) {
    (void)state;
    for (int p = 2; p <= 4; p += 2) {
        job_parts j;
        make_job(&j, gpt(4, 128, 4, 64, 256), p, 1, 1, 1);
        j.j.dpc.algo = BP_DP_ASYNC;
        j.j.local_steps = true;
        *bp_async_in(&j.j.dpc.settings) = (bp_async_settings){.sync_ms = 1, .agree_every = 10};
        size_t n = bp_sim_model_params(&j.j.mc, 1, 0, j.j.mc.n_layer + 2);
        double chunk_bits = (double)((n + 1 + p - 1) / p * sizeof(float)) * 8.0, bw = 1e7;
        bp_sim_machine slow = fast_machine(bw, 1e-3), fast = fast_machine(1e15, 1e-3);
        slow.flops = fast.flops = 1e10;
        double t_slow = simulate(&j.j, &slow).step_s, t_fast = simulate(&j.j, &fast).step_s;
        double ring = 2 * (p - 1) * chunk_bits / bw, busy = ring / (ring + 2 * t_fast);
        double want = (p == 2 ? 2 : 1) * (chunk_bits / bw / 2) / 10;
        assert_true(t_slow - t_fast <= want * (1 + 1e-9));
        assert_true(t_slow - t_fast >= busy * want);
    }
}

/* async's rounds beside a pipeline, one rank a node: each stage's node card carries
 * the dp ring and the pipeline's messages, which then take longer on the wire (each
 * at most twice, TCP's flows halving the card); with links per pair the two never
 * meet. */
static void test_pipeline_shares_a_card_with_async_rounds(void **state) {
    (void)state;
    const double bw = 1e8;
    job_parts p;
    make_job(&p, gpt(4, 128, 4, 64, 256), 2, 2, 1, 4);
    p.j.dpc.algo = BP_DP_ASYNC;
    *bp_async_in(&p.j.dpc.settings) = (bp_async_settings){.sync_ms = 1, .agree_every = 10};
    bp_sim_machine m = fast_machine(bw, 1e-4);
    m.flops = 1e11;
    m.ranks_per_node = 1;
    m.per_pair = true;
    double own = simulate(&p.j, &m).step_s;
    m.per_pair = false;
    double shared = simulate(&p.j, &m).step_s;
    /* the pipeline's messages a step: M activations forward, M gradients back */
    double wire = 2.0 * p.j.M * (double)p.j.micro_B * 64 * 128 * sizeof(float) * 8 / bw;
    assert_true(shared > own + 0.05 * wire);
    assert_true(shared <= own + wire);
}

/* AvgPipe's tied meeting (the first and last stages' allreduce at each inline update
 * of a stream) waits for the last stage's gradient on the pipeline's link only where
 * it shares that link: on 2 stages, or a pipeline across nodes of one network card
 * each; not 4 stages within one node, nor links per pair. Every link is alike, so the
 * wait is all that tells them apart. */
static void test_tied_meeting_waits_where_it_shares_a_link(void **state) {
    (void)state;
    job_parts p;
    make_job(&p, gpt(4, 128, 4, 64, 256), 1, 4, 1, 1);
    p.j.avgpipe = true;
    p.j.N = 2;
    p.j.stream_steps = 4;
    bp_sim_machine m = fast_machine(1e8, 1e-4);
    m.flops = 1e12;
    m.ranks_per_node = 4;
    double node = simulate(&p.j, &m).step_s;
    m.ranks_per_node = 1;
    m.per_pair = true;
    double pairs = simulate(&p.j, &m).step_s;
    m.per_pair = false;
    double cards = simulate(&p.j, &m).step_s;
    assert_near(node, pairs, 1e-12);
    /* the last stage's activation gradient (micro_B x T x C floats), and the inline
     * updates of a stream, each of which may wait for a pipeline's gradients */
    double wire = 2.0 * 64 * 128 * sizeof(float) * 8 / 1e8;
    int K = p.j.stream_steps, inline_updates = (K - 1) * p.j.N;
    assert_true(cards >= pairs + 0.5 * wire / K);
    assert_true(cards <= pairs + inline_updates * p.j.N * p.j.M * wire / K);
}

/* A rank's messages to several peers: one after another on one link; side by side
 * where links are per pair (comm/'s --net). A device pass of the communication thread
 * waits for the kernel computing beside it, none when nothing computes. */
static void test_prices_side_by_side_and_pass_waits(void **state) {
    (void)state;
    bp_sim_machine m = fast_machine(1e9, 1e-4);
    bp_dp_cost_env e = {.price = &bp_sim_prices, .machine = &m, .link = &m.inter, .p = 4, .here = 1};
    double one = 8000 / 1e9 + 1e-4;
    assert_near(bp_sim_prices.alltoall_s(&e, 1000), 3 * 8000 / 1e9 + 1e-4, 1e-15);
    assert_near(bp_sim_prices.burst_s(&e, 2, 1000), 2 * 8000 / 1e9 + 1e-4, 1e-15);
    m.per_pair = true;
    assert_near(bp_sim_prices.alltoall_s(&e, 1000), one, 1e-15);
    assert_near(bp_sim_prices.burst_s(&e, 2, 1000), one, 1e-15);
    assert_near(bp_sim_prices.pass_waits_s(&e, 7), 0, 0);
    e.beside_kernel_s = 2e-5;
    assert_near(bp_sim_prices.pass_waits_s(&e, 7), 1.4e-4, 1e-15);
}

static void test_more_bandwidth_never_slower(void **state) {
    (void)state;
    const int algos[] = {BP_DP_ALLREDUCE, BP_DP_BYTEGRAD,        BP_DP_QADAM,
                         BP_DP_DECENTRALIZED, BP_DP_LP_DECENTRALIZED, BP_DP_ASYNC,
                         BP_DP_POWERSGD, BP_DP_EASGD};
    const bp_sched_kind scheds[] = {BP_SCHED_GPIPE, BP_SCHED_1F1B, BP_SCHED_AFP};
    for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++)
        for (int pp = 1; pp <= 4; pp *= 2)
            for (int tp = 1; tp <= 2; tp++)
                for (size_t k = 0; k < 3; k++) {
                    job_parts p;
                    make_job(&p, gpt(6, 128, 4, 32, 256), 4, pp, tp, 4);
                    p.j.dpc.algo = algos[a];
                    p.j.dpc.bucket_mb = 0.25;
                    p.j.sched = (bp_schedule){scheds[k], 1};
                    p.j.cb_rank = pp > 1 ? 2 : 0;
                    p.j.dpc.hierarchical = k == 2; /* afp runs hierarchical dp */
                    double last = INFINITY;
                    for (double bw = 1e7; bw <= 1e12; bw *= 3.7) {
                        bp_sim_machine m = fast_machine(bw, 1e-4);
                        m.flops = 1e10;
                        m.mem_Bps = 1e10;
                        m.ranks_per_node = 2;
                        m.inter.net.bw_bps = bw / 4;
                        double t = simulate(&p.j, &m).step_s;
                        assert_true(t <= last * (1 + 1e-12));
                        last = t;
                    }
                }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensors_match_the_model),
        cmocka_unit_test(test_mlp_tensors_match_the_model),
        cmocka_unit_test(test_measured_stages),
        cmocka_unit_test(test_links_per_axis),
        cmocka_unit_test(test_ring_allreduce_closed_form),
        cmocka_unit_test(test_polling_ring_waits_at_every_exchange),
        cmocka_unit_test(test_device_collective_staged_through_host),
        cmocka_unit_test(test_pipeline_message_staged_through_host),
        cmocka_unit_test(test_avgpipe_local_steps),
        cmocka_unit_test(test_overlap_hides_all_but_the_last_bucket),
        cmocka_unit_test(test_bytegrad_sends_a_quarter),
        cmocka_unit_test(test_qadam_early_momentum_goes_by_bucket),
        cmocka_unit_test(test_gpipe_bubble),
        cmocka_unit_test(test_tp_allreduces),
        cmocka_unit_test(test_tp_allreduces_wait_for_handovers),
        cmocka_unit_test(test_per_pair_links_share_no_card),
        cmocka_unit_test(test_hierarchical_closed_form),
        cmocka_unit_test(test_async_holds_the_step_for_its_host_copies),
        cmocka_unit_test(test_async_agreement_queues_behind_its_rounds),
        cmocka_unit_test(test_pipeline_shares_a_card_with_async_rounds),
        cmocka_unit_test(test_tied_meeting_waits_where_it_shares_a_link),
        cmocka_unit_test(test_prices_side_by_side_and_pass_waits),
        cmocka_unit_test(test_decentralized_stages_its_weights_on_a_device),
        cmocka_unit_test(test_more_bandwidth_never_slower),
        cmocka_unit_test(test_decentralized_hides_its_exchange),
        cmocka_unit_test(test_every_algorithm_declares_its_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

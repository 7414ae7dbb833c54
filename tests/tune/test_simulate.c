/* The pipeline step predictor (plan/sim_pipeline.c) on synthetic stages.
 *
 *  - Equal stages, free messages: gpipe, 1f1b and afp:K take (V + S - 1)(F + B)
 *    for a stream of V = N x M micro-batches; the bubble, (S - 1) / (V + S - 1),
 *    shrinks as M grows.
 *  - Each stage's peak stash is bp_schedule_peak_stash (M for gpipe, S - s for 1f1b,
 *    min(M, S - s + K) for afp:K, over the stream); afp's memory lies between 1f1b's
 *    and gpipe's; peak bytes = N x replica bytes + peak stash x activation bytes.
 *  - Messages: a latency on both directions, an emulated link that serializes
 *    messages one after another (hand-computed timelines), the copy cost without
 *    emulation, the wake-up delay only where a stage waited; the ring allreduce's
 *    cost.
 *  - The update before and the collectives after the operations add up.
 *  - No candidate that tune can list (S <= 6, N in {1, 2, 4}, M <= 16, every
 *    advance) stalls, for random stage times and messages. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bagpipe/comm.h"
#include "core/rng.h"
#include "parallel/schedule.h"
#include "plan/sim_pipeline.h"

enum { MAX_S = 8 };

/* |a - b| <= tol, saying both when not. */
#define assert_near(a, b, tol) assert_near_at((a), (b), (tol), __FILE__, __LINE__)
static void assert_near_at(double a, double b, double tol, const char *file, int line) {
    if (fabs(a - b) <= tol) return;
    print_error("%s:%d: %.12g != %.12g (tolerance %g)\n", file, line, a, b, tol);
    fail();
}

static bp_sim_config equal_stages(bp_sim_stage *st, int S, int N, int M, bp_schedule sched,
                                  double F, double B) {
    for (int s = 0; s < S; s++)
        st[s] = (bp_sim_stage){.fwd_s = F, .bwd_s = B, .act_bytes = 1000, .replica_bytes = 100,
                               .out_bytes = 4096};
    return (bp_sim_config){.S = S, .N = N, .M = M, .sched = sched, .stage = st};
}

static bp_sim_result run(const bp_sim_config *c, bp_sim_stage_result *per_stage) {
    bp_sim_result r;
    assert_int_equal(bp_sim_run(c, &r, per_stage), BP_OK);
    assert_false(r.deadlock);
    return r;
}

static void test_closed_form_equal_stages(void **state) {
    (void)state;
    bp_sim_stage st[MAX_S];
    const double F = 1.0, B = 2.0;
    for (int S = 1; S <= 6; S++)
        for (int N = 1; N <= 4; N *= 2)
            for (int M = 1; M <= 12; M++) {
                int V = N * M;
                bp_schedule scheds[] = {{BP_SCHED_GPIPE, 0}, {BP_SCHED_1F1B, 0}, {BP_SCHED_AFP, 1},
                                        {BP_SCHED_AFP, 3}, {BP_SCHED_AFP, V}};
                for (size_t i = 0; i < sizeof scheds / sizeof scheds[0]; i++) {
                    bp_sim_config c = equal_stages(st, S, N, M, scheds[i], F, B);
                    bp_sim_result r = run(&c, NULL);
                    assert_near(r.step_s, (V + S - 1) * (F + B), 1e-9);
                    assert_near(r.bubble, (double)(S - 1) / (V + S - 1), 1e-9);
                }
            }
}

static void test_bubble_shrinks_with_m(void **state) {
    (void)state;
    bp_sim_stage st[MAX_S];
    bp_schedule sched = {BP_SCHED_1F1B, 0};
    for (int S = 2; S <= 6; S++) {
        double prev = 1.0;
        for (int M = 1; M <= 32; M *= 2) {
            bp_sim_config c = equal_stages(st, S, 1, M, sched, 1.0, 2.0);
            /* The same work in more, smaller micro-batches. */
            for (int s = 0; s < S; s++) st[s].fwd_s = 1.0 / M, st[s].bwd_s = 2.0 / M;
            bp_sim_result r = run(&c, NULL);
            assert_true(r.bubble < prev);
            prev = r.bubble;
        }
    }
}

static void test_peak_memory_follows_stash(void **state) {
    (void)state;
    bp_sim_stage st[MAX_S];
    bp_sim_stage_result g[MAX_S], o[MAX_S], a[MAX_S];
    for (int S = 1; S <= 6; S++)
        for (int N = 1; N <= 4; N *= 2)
            for (int M = 1; M <= 10; M++)
                for (int K = 0; K <= N * M + 1; K++) {
                    bp_schedule gp = {BP_SCHED_GPIPE, 0}, ob = {BP_SCHED_1F1B, 0},
                                afp = {BP_SCHED_AFP, K};
                    bp_sim_config c = equal_stages(st, S, N, M, gp, 1.0, 2.0);
                    run(&c, g);
                    c.sched = ob;
                    run(&c, o);
                    c.sched = afp;
                    bp_sim_result r = run(&c, a);
                    double peak = 0;
                    int V = N * M;
                    for (int s = 0; s < S; s++) {
                        assert_int_equal(g[s].peak_stash, V);
                        assert_int_equal(o[s].peak_stash, S - s < V ? S - s : V);
                        assert_int_equal(a[s].peak_stash, S - s + K < V ? S - s + K : V);
                        assert_int_equal(a[s].peak_stash, bp_schedule_peak_stash(&afp, S, s, V));
                        assert_true(o[s].peak_bytes <= a[s].peak_bytes);
                        assert_true(a[s].peak_bytes <= g[s].peak_bytes);
                        assert_near(a[s].peak_bytes, N * 100.0 + a[s].peak_stash * 1000.0,
                                            1e-9);
                        peak = a[s].peak_bytes > peak ? a[s].peak_bytes : peak;
                    }
                    assert_near(r.peak_bytes, peak, 1e-9);
                }
}

static void test_latency_both_ways(void **state) {
    (void)state;
    bp_sim_stage st[MAX_S];
    bp_sim_config c = equal_stages(st, 2, 1, 1, (bp_schedule){BP_SCHED_1F1B, 0}, 1.0, 2.0);
    c.link.net = (bp_net){.on = true, .lat_s = 0.5};
    bp_sim_stage_result o[2];
    bp_sim_result r = run(&c, o);
    /* F0 | 0.5 | F1 B1 | 0.5 | B0 */
    assert_near(r.step_s, 1 + 0.5 + 1 + 2 + 0.5 + 2, 1e-9);
    assert_near(o[0].idle_s, 0.5 + 3 + 0.5, 1e-9);
    assert_near(o[1].idle_s, 1.5, 1e-9);
}

static void test_link_serializes_messages(void **state) {
    (void)state;
    bp_sim_stage st[MAX_S];
    bp_sim_config c = equal_stages(st, 2, 1, 2, (bp_schedule){BP_SCHED_GPIPE, 0}, 1.0, 1.0);
    /* 4096 bytes at 4096 x 8 / 3 bit/s: 3 s on the wire. Stage 0: F0 0-1, F1 1-2; sends
     * arrive at 4 and 7 (the second waits for the link). Stage 1: F0 4-5, F1 7-8, B0
     * 8-9, B1 9-10; gradients arrive at 12 and 15. Stage 0: B0 12-13, B1 15-16. */
    c.link.net = (bp_net){.on = true, .bw_bps = 4096 * 8 / 3.0};
    bp_sim_stage_result o[2];
    bp_sim_result r = run(&c, o);
    assert_near(r.step_s, 16, 1e-9);
    assert_near(o[1].end_s, 10, 1e-9);
    assert_near(o[1].idle_s, 4 + 2, 1e-9);
}

static void test_copy_cost_without_emulation(void **state) {
    (void)state;
    bp_sim_link l = {.msg_s = 0.25, .copy_Bps = 1000};
    assert_near(bp_sim_message_s(&l, 500), 0.75, 1e-12);
    bp_sim_stage st[MAX_S];
    bp_sim_config c = equal_stages(st, 3, 1, 1, (bp_schedule){BP_SCHED_1F1B, 0}, 1.0, 2.0);
    c.link = l;
    for (int s = 0; s < 3; s++) st[s].out_bytes = 500;
    /* Four messages on the critical path. */
    assert_near(run(&c, NULL).step_s, 3 * (1 + 2) + 4 * 0.75, 1e-9);
}

static void test_wake_after_waiting_only(void **state) {
    (void)state;
    bp_sim_stage st[MAX_S];
    /* gpipe, S = 2, M = 2, F = 1, B = 2: stage 1 waits for F0 and F1 (each arrives
     * when the stage is idle), stage 0 waits for B0 but not for B1 (it arrives
     * while stage 0 computes B0). */
    bp_sim_config c = equal_stages(st, 2, 1, 2, (bp_schedule){BP_SCHED_GPIPE, 0}, 1.0, 2.0);
    c.link.wake_s = 0.5;
    bp_sim_stage_result o[2];
    bp_sim_result r = run(&c, o);
    /* Stage 1: F0 1.5-2.5, F1 2.5-3.5 (its input came at 2, no wait), B0 3.5-5.5,
     * B1 5.5-7.5. Stage 0: F0 0-1, F1 1-2, B0 6-8 (arrived 5.5), B1 8-10. */
    assert_near(o[1].end_s, 7.5, 1e-9);
    assert_near(r.step_s, 10, 1e-9);
    bp_sim_link l = {.msg_s = 0.1, .wake_s = 0.5};
    assert_near(bp_sim_allreduce_s(&l, 2, 8), 2 * 0.6, 1e-12);
}

static void test_allreduce_cost(void **state) {
    (void)state;
    bp_sim_link l = {.net = {.on = true, .lat_s = 1e-3}};
    assert_near(bp_sim_allreduce_s(&l, 1, 1 << 20), 0, 0);
    assert_near(bp_sim_allreduce_s(&l, 2, 8), 2e-3, 1e-12);
    /* up to BP_ALLREDUCE_TREE_MAX_BYTES over more than 2 ranks: reduce and broadcast,
     * 2 ceil(log2 P) messages; beyond, the ring's 2 (P - 1) */
    assert_near(bp_sim_allreduce_s(&l, 4, 8), 4e-3, 1e-12);
    assert_near(bp_sim_allreduce_s(&l, 5, 8), 6e-3, 1e-12);
    assert_near(bp_sim_allreduce_s(&l, 4, BP_ALLREDUCE_TREE_MAX_BYTES + 4), 6e-3, 1e-12);
    l.net.bw_bps = 8e6; /* 1 MB/s: each of 2 (P - 1) exchanges moves 1/P */
    assert_near(bp_sim_allreduce_s(&l, 4, 4000000), 6 * (1.0 + 1e-3), 1e-9);
}

static void test_update_and_sync_add_up(void **state) {
    (void)state;
    bp_sim_stage st[MAX_S];
    bp_sim_config c = equal_stages(st, 1, 1, 3, (bp_schedule){BP_SCHED_1F1B, 0}, 1.0, 2.0);
    st[0].update_s = 0.5;
    c.sync_s = 0.25;
    assert_near(run(&c, NULL).step_s, 0.5 + 3 * 3 + 0.25, 1e-9);
    /* The slowest stage's update delays everyone downstream. */
    c = equal_stages(st, 2, 1, 1, (bp_schedule){BP_SCHED_1F1B, 0}, 1.0, 2.0);
    st[1].update_s = 5;
    assert_near(run(&c, NULL).step_s, 5 + 1 + 2 + 2, 1e-9);
}

static void test_no_candidate_stalls(void **state) {
    (void)state;
    bp_rng r;
    bp_rng_seed(&r, 11, 0);
    bp_sim_stage st[MAX_S];
    for (int S = 1; S <= 6; S++)
        for (int N = 1; N <= 4; N *= 2)
            for (int M = 1; M <= 16; M++)
                for (int K = -2; K <= N * M; K++) {
                    bp_schedule sched = K == -2   ? (bp_schedule){BP_SCHED_GPIPE, 0}
                                        : K == -1 ? (bp_schedule){BP_SCHED_1F1B, 0}
                                                  : (bp_schedule){BP_SCHED_AFP, K};
                    bp_sim_config c = equal_stages(st, S, N, M, sched, 1, 1);
                    for (int s = 0; s < S; s++) {
                        st[s].fwd_s = 0.1 + bp_rng_uniform(&r);
                        st[s].bwd_s = 0.1 + 2 * bp_rng_uniform(&r);
                        st[s].update_s = 0.1 * bp_rng_uniform(&r);
                    }
                    c.link = (bp_sim_link){.net = {.on = (K & 1) != 0, .lat_s = 0.01,
                                                   .bw_bps = 1e5},
                                           .msg_s = 0.02, .copy_Bps = 1e6};
                    bp_sim_result res = run(&c, NULL);
                    double work = 0;
                    for (int s = 0; s < S; s++) work = fmax(work, N * M * (st[s].fwd_s + st[s].bwd_s));
                    assert_true(res.step_s >= work);
                }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_form_equal_stages),
        cmocka_unit_test(test_bubble_shrinks_with_m),
        cmocka_unit_test(test_peak_memory_follows_stash),
        cmocka_unit_test(test_latency_both_ways),
        cmocka_unit_test(test_link_serializes_messages),
        cmocka_unit_test(test_copy_cost_without_emulation),
        cmocka_unit_test(test_wake_after_waiting_only),
        cmocka_unit_test(test_allreduce_cost),
        cmocka_unit_test(test_update_and_sync_add_up),
        cmocka_unit_test(test_no_candidate_stalls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

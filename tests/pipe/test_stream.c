/* AvgPipe's stream of K steps without a flush (parallel/schedule.h,
 * bp_schedule_stream), without MPI, for S <= 5 stages, N <= 3 pipelines, M <= 4
 * micro-batches, K <= 4 steps, gpipe, 1f1b and afp:1, afp:2, with and without a
 * tied tensor, on every stage:
 *  - the list has 2 K N M forwards and backwards and (K - 1) N updates; forwards
 *    and backwards each go through the positions in stream order, the forward of
 *    each before its backward; update U(t, j) exactly once for t < K - 1, after
 *    pipeline j's last backward of step t (with a tied tensor on the last stage
 *    S - 1 positions' backwards later, at most to the step's last, elsewhere right
 *    after it) and before the first forward of pipeline j in step t + 1; no
 *    update of the last step (the caller's);
 *  - the peak it reports is the most positions held at once (counted from the
 *    list), at most w + 1 (w: the warm-up of one step) and K N M; a shorter stream
 *    never holds more (the runtime sizes its slots by the longest);
 *  - K = 1 is bp_schedule_ops over the N M positions, op for op;
 *  - the whole pipeline completes: every stage running its list, a forward
 *    waiting for the previous stage's, a backward for the next stage's, an update
 *    of the first and last stages with a tied tensor for the other's (their
 *    collective), with sends that complete only when received and the runtime's
 *    slots (peak of them, shared by the pipelines, reused only once their sends
 *    completed);
 *  - the simulator (plan/sim_pipeline.h) runs the same lists to the end and
 *    predicts the same peak on every stage; with free updates a stream of K steps
 *    is at most 3% slower per step than a flush every step (the lists are greedy,
 *    not optimal: N > S with a tied tensor loses a little), and 1f1b with S >= 3
 *    and N >= 2 is faster.
 * The check itself can fail: a list whose update comes after the next step's
 * forward, or one slot fewer, is caught. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "parallel/schedule.h"
#include "plan/sim_pipeline.h"

enum { MAX_S = 5, MAX_N = 3, MAX_M = 4, MAX_K = 4, MAX_V = MAX_N * MAX_M * MAX_K,
       MAX_OPS = 2 * MAX_V + MAX_K * MAX_N, MAX_SLOTS = MAX_V };

static bp_schedule scheds[] = {{BP_SCHED_GPIPE, 0}, {BP_SCHED_1F1B, 0}, {BP_SCHED_AFP, 1},
                               {BP_SCHED_AFP, 2}};
enum { N_SCHEDS = sizeof scheds / sizeof scheds[0] };

static char where[128];

static void describe(const bp_schedule *sc, const bp_stream *st) {
    char name[32];
    bp_schedule_name(sc, name, sizeof name);
    snprintf(where, sizeof where, "%s S=%d s=%d N=%d M=%d K=%d%s", name, st->S, st->s, st->N,
             st->M, st->stream_len, st->tied ? " tied" : "");
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* Checks one stage's list (n ops); returns the most positions held at once. */
static int check_list(const bp_schedule *sc, const bp_stream *st, const bp_pipe_op *ops, int n) {
    int N = st->N, V = N * st->M, total = st->stream_len * V, f = 0, b = 0, held = 0, peak = 0;
    int upd_at[MAX_K * MAX_N], fwd_at[MAX_V], bwd_at[MAX_V];
    for (int u = 0; u < MAX_K * MAX_N; u++) upd_at[u] = -1;
    if (n != 2 * total + (st->stream_len - 1) * N) fail_msg("%s: %d ops", where, n);
    for (int i = 0; i < n; i++) {
        const bp_pipe_op *op = &ops[i];
        if (op->update) {
            if (op->micro < 0 || op->micro >= (st->stream_len - 1) * N || upd_at[op->micro] >= 0)
                fail_msg("%s: op %d updates %d", where, i, op->micro);
            upd_at[op->micro] = i;
        } else if (op->forward) {
            if (op->micro != f) fail_msg("%s: op %d forwards %d, expected %d", where, i, op->micro, f);
            fwd_at[f++] = i;
            if (++held > peak) peak = held;
        } else {
            if (op->micro != b) fail_msg("%s: op %d backwards %d, expected %d", where, i, op->micro, b);
            if (b >= f) fail_msg("%s: backward of %d before its forward", where, b);
            bwd_at[b++] = i;
            held--;
        }
    }
    if (f != total || b != total) fail_msg("%s: %d forwards, %d backwards", where, f, b);
    int d = st->tied && st->S > 1 && st->s == st->S - 1 ? st->S - 1 : 0;
    for (int u = 0; u < (st->stream_len - 1) * N; u++) {
        int t = u / N, j = u % N, last = t * V + (st->M - 1) * N + j;
        int after = bwd_at[min_int(last + d, (t + 1) * V - 1)];
        if (upd_at[u] < after) fail_msg("%s: U(%d, %d) before its backwards", where, t, j);
        for (int i = after + 1; i < upd_at[u]; i++)
            if (!ops[i].update) fail_msg("%s: U(%d, %d) not right after its backwards", where, t, j);
        if (upd_at[u] > fwd_at[(t + 1) * V + j])
            fail_msg("%s: U(%d, %d) after step %d's first forward of pipeline %d", where, t, j,
                     t + 1, j);
    }
    int w = bp_schedule_warmup(sc, st->S, st->s, V);
    if (peak > w + 1 || peak > total) fail_msg("%s: holds %d (w = %d)", where, peak, w);
    return peak;
}

/* ---- the whole pipeline ---------------------------------------------------------- */

typedef struct stage {
    const bp_pipe_op *ops;
    int n, at;
    int slot_pos[MAX_SLOTS]; /* position held, -1: free */
    int last_f[MAX_SLOTS], last_b[MAX_SLOTS]; /* the slot's last sends */
    int n_slots;
} stage;

typedef struct pipeline {
    int S, N;
    bool tied;
    stage st[MAX_S];
    bool fdone[MAX_S][MAX_V], bdone[MAX_S][MAX_V], reached[MAX_S][MAX_K * MAX_N];
    char error[160];
} pipeline;

static int find(const stage *st, int pos) {
    for (int i = 0; i < st->n_slots; i++)
        if (st->slot_pos[i] == pos) return i;
    return -1;
}

/* Stage s's next op if it can run now; true if it ran. */
static bool step(pipeline *p, int s) {
    stage *st = &p->st[s];
    const bp_pipe_op *op = &st->ops[st->at];
    int v = op->micro, S = p->S;
    if (op->update) {
        p->reached[s][v] = true;
        int other = s == 0 ? S - 1 : 0;
        if (p->tied && S > 1 && (s == 0 || s == S - 1) && !p->reached[other][v]) return false;
    } else if (op->forward) {
        int c = find(st, -1);
        if (c < 0) {
            snprintf(p->error, sizeof p->error, "stage %d: no free slot for F%d", s, v);
            return false;
        }
        if (st->last_f[c] >= 0 && !p->fdone[s + 1][st->last_f[c]]) return false;
        if (s > 0 && !p->fdone[s - 1][v]) return false;
        st->slot_pos[c] = v;
        if (s < S - 1) st->last_f[c] = v;
        p->fdone[s][v] = true;
    } else {
        int c = find(st, v);
        if (c < 0) {
            snprintf(p->error, sizeof p->error, "stage %d: nothing held for B%d", s, v);
            return false;
        }
        if (st->last_b[c] >= 0 && !p->bdone[s - 1][st->last_b[c]]) return false;
        if (s < S - 1 && !p->bdone[s + 1][v]) return false;
        st->slot_pos[c] = -1;
        if (s > 0) st->last_b[c] = v;
        p->bdone[s][v] = true;
    }
    st->at++;
    return true;
}

static void run(pipeline *p) {
    for (bool moved = true; moved && !p->error[0];) {
        moved = false;
        for (int s = 0; s < p->S && !p->error[0]; s++)
            while (p->st[s].at < p->st[s].n && step(p, s)) moved = true;
    }
    for (int s = 0; s < p->S && !p->error[0]; s++)
        if (p->st[s].at < p->st[s].n)
            snprintf(p->error, sizeof p->error, "deadlock: stage %d waits at op %d", s, p->st[s].at);
}

static void init_pipeline(pipeline *p, int S, int N, bool tied, bp_pipe_op (*ops)[MAX_OPS],
                          const int *n, const int *slots) {
    memset(p, 0, sizeof *p);
    p->S = S, p->N = N, p->tied = tied;
    for (int s = 0; s < S; s++) {
        stage *st = &p->st[s];
        st->ops = ops[s], st->n = n[s], st->n_slots = slots[s];
        for (int i = 0; i < MAX_SLOTS; i++) st->slot_pos[i] = st->last_f[i] = st->last_b[i] = -1;
    }
}

static bp_pipe_op the_ops[MAX_S][MAX_OPS];
static pipeline the_pipe;

/* Every combination: lists, peaks, K = 1, the pipeline and the simulator. */
static void test_streams(void **state) {
    (void)state;
    int checked = 0;
    for (int S = 1; S <= MAX_S; S++)
        for (int N = 1; N <= MAX_N; N++)
            for (int M = 1; M <= MAX_M; M++)
                for (int K = 1; K <= MAX_K; K++)
                    for (int k = 0; k < N_SCHEDS; k++)
                        for (int tied = 0; tied < 2; tied++) {
                            const bp_schedule *sc = &scheds[k];
                            int n[MAX_S], slots[MAX_S], peaks[MAX_S];
                            for (int s = 0; s < S; s++) {
                                bp_stream st = {S, s, N, M, K, tied};
                                describe(sc, &st);
                                n[s] = bp_schedule_stream(sc, &st, the_ops[s], &peaks[s]);
                                if (check_list(sc, &st, the_ops[s], n[s]) != peaks[s])
                                    fail_msg("%s: reported peak %d is not the list's", where,
                                             peaks[s]);
                                for (int k2 = 1; k2 < K; k2++) {
                                    int shorter;
                                    bp_stream st2 = {S, s, N, M, k2, tied};
                                    bp_schedule_stream(sc, &st2, NULL, &shorter);
                                    if (shorter > peaks[s])
                                        fail_msg("%s: %d steps hold %d > %d", where, k2, shorter,
                                                 peaks[s]);
                                }
                                if (K == 1) {
                                    bp_pipe_op plain[MAX_OPS];
                                    bp_schedule_ops(sc, S, s, N * M, plain);
                                    for (int i = 0; i < n[s]; i++)
                                        if (plain[i].forward != the_ops[s][i].forward ||
                                            plain[i].micro != the_ops[s][i].micro)
                                            fail_msg("%s: op %d differs from bp_schedule_ops", where, i);
                                    if (peaks[s] != bp_schedule_peak_stash(sc, S, s, N * M))
                                        fail_msg("%s: peak %d, peak_stash %d", where, peaks[s],
                                                 bp_schedule_peak_stash(sc, S, s, N * M));
                                }
                                slots[s] = peaks[s];
                            }
                            init_pipeline(&the_pipe, S, N, tied, the_ops, n, slots);
                            run(&the_pipe);
                            if (the_pipe.error[0]) fail_msg("%s: %s", where, the_pipe.error);
                            checked++;
                        }
    assert_true(checked > 1500);
}

/* A wrong list or one slot fewer does not pass. */
static void test_checks_can_fail(void **state) {
    (void)state;
    bp_schedule f1b1 = {BP_SCHED_1F1B, 0};
    int n[MAX_S], slots[MAX_S], peak;
    for (int s = 0; s < 3; s++) {
        n[s] = bp_schedule_stream(&f1b1, &(bp_stream){3, s, 2, 2, 3, true}, the_ops[s], &peak);
        slots[s] = peak;
    }
    init_pipeline(&the_pipe, 3, 2, true, the_ops, n, slots);
    run(&the_pipe);
    assert_string_equal(the_pipe.error, "");
    slots[1]--;
    init_pipeline(&the_pipe, 3, 2, true, the_ops, n, slots);
    run(&the_pipe);
    assert_non_null(strstr(the_pipe.error, "no free slot"));
    /* Stage 2 of 3 holds a single position; move its U(0, 0) to the end: after step
     * 1's first forward of pipeline 0, and the first stage waits for it too long. */
    slots[1]++;
    int u = -1;
    for (int i = 0; i < n[2]; i++)
        if (the_ops[2][i].update && the_ops[2][i].micro == 0) u = i;
    assert_true(u >= 0);
    bp_pipe_op moved = the_ops[2][u];
    memmove(&the_ops[2][u], &the_ops[2][u + 1], (size_t)(n[2] - u - 1) * sizeof moved);
    the_ops[2][n[2] - 1] = moved;
    init_pipeline(&the_pipe, 3, 2, true, the_ops, n, slots);
    run(&the_pipe);
    assert_non_null(strstr(the_pipe.error, "deadlock"));
}

/* The simulator runs the stream's lists: the same peak per stage, no deadlock, and
 * with free updates and a free network a stream is no slower per step than a flush. */
static void test_simulator_runs_streams(void **state) {
    (void)state;
    for (int S = 2; S <= MAX_S; S++)
        for (int N = 1; N <= MAX_N; N++)
            for (int k = 0; k < N_SCHEDS; k++) {
                bp_sim_stage st[MAX_S];
                for (int s = 0; s < S; s++)
                    st[s] = (bp_sim_stage){.fwd_s = 1e-3, .bwd_s = 2e-3, .inline_update_s = 1e-4,
                                           .act_bytes = 1, .out_bytes = 1000};
                bp_sim_config c = {.S = S, .N = N, .M = 3, .stream_len = 4, .tied = true,
                                   .sched = scheds[k], .stage = st, .link = {.msg_s = 1e-4}};
                bp_sim_stage_result per[MAX_S];
                bp_sim_result stream, flush;
                assert_int_equal(bp_sim_run(&c, &stream, per), BP_OK);
                for (int s = 0; s < S; s++) {
                    int peak;
                    bp_schedule_stream(&scheds[k], &(bp_stream){S, s, N, 3, 4, true}, NULL, &peak);
                    assert_int_equal(per[s].peak_stash, peak);
                }
                for (int s = 0; s < S; s++) st[s].inline_update_s = 0;
                assert_int_equal(bp_sim_run(&c, &stream, NULL), BP_OK);
                c.stream_len = 1;
                assert_int_equal(bp_sim_run(&c, &flush, NULL), BP_OK);
                if (stream.step_s > flush.step_s * 1.03 ||
                    (k == 1 && S >= 3 && N >= 2 && stream.step_s >= flush.step_s))
                    fail_msg("S=%d N=%d schedule %d: stream %.6g s per step, flush %.6g", S, N, k,
                             stream.step_s, flush.step_s);
            }
}

/* AvgPipe on 2 stages: the tied tensor's allreduce at an inline update rides the
 * pipeline's pair of links, so it waits for the last stage's gradients still on the
 * wire: the stream gets longer, by at least half of one's time on the wire and at
 * most that of a step's N x M of them at each of its (K - 1) x N inline updates. */
static void test_tied_update_waits_for_the_gradient_on_the_wire(void **state) {
    (void)state;
    const double bw = 1e9, wire = 1e6 * 8 / bw;
    bp_sim_stage st[2];
    for (int s = 0; s < 2; s++)
        st[s] = (bp_sim_stage){.fwd_s = 1e-3, .bwd_s = 2e-3, .inline_update_s = 1e-4,
                               .act_bytes = 1, .out_bytes = 1000000};
    bp_sim_config c = {.S = 2, .N = 2, .M = 1, .stream_len = 2, .tied = true,
                       .sched = scheds[1], .stage = st,
                       .link = {.net = {.on = true, .bw_bps = bw, .lat_s = 1e-4}}};
    bp_sim_result apart, riding;
    bp_sim_stage_result pa[2], pr[2];
    assert_int_equal(bp_sim_run(&c, &apart, pa), BP_OK);
    c.tied_rides_pipeline = true;
    assert_int_equal(bp_sim_run(&c, &riding, pr), BP_OK);
    int inline_updates = (c.stream_len - 1) * c.N;
    assert_true(riding.step_s >= apart.step_s + 0.5 * wire / c.stream_len);
    double per_update = c.N * c.M * wire;
    assert_true(riding.step_s <= apart.step_s + inline_updates * per_update / c.stream_len);
    /* a stage's time is its work and its two kinds of wait; the wait for the meeting
     * is the meeting's (the embedding's), not the pipeline's */
    for (int s = 0; s < 2; s++) {
        assert_true(fabs(pa[s].end_s - (st[s].update_s + pa[s].busy_s + pa[s].idle_s + pa[s].meet_s)) < 1e-12);
        assert_true(fabs(pr[s].end_s - (st[s].update_s + pr[s].busy_s + pr[s].idle_s + pr[s].meet_s)) < 1e-12);
    }
    assert_true(pr[0].meet_s + pr[1].meet_s >= pa[0].meet_s + pa[1].meet_s + 0.5 * wire);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streams),
        cmocka_unit_test(test_checks_can_fail),
        cmocka_unit_test(test_simulator_runs_streams),
        cmocka_unit_test(test_tied_update_waits_for_the_gradient_on_the_wire),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Pipeline schedules and partitions, without MPI.
 *
 * Schedules (parallel/schedule.c), for every S <= 8, stage s, M <= 12 and afp:K with
 * K <= M + 2:
 *  - the op list has 2M ops; every micro-batch is run forward exactly once and
 *    backward exactly once, after its forward; forwards and backwards each go
 *    0..M-1; the list is w warm-up forwards, then F and B in turn, then the
 *    remaining Bs, with w = M (gpipe), min(M, S-s-1) (1f1b), min(M, S-s-1+K) (afp:K);
 *  - the most micro-batches held at once (simulated from the list) equals
 *    bp_schedule_peak_stash and M, min(M, S-s), min(M, S-s+K);
 *  - afp:0 is 1f1b and afp:K for K >= M is gpipe, op for op;
 *  - the whole pipeline (every stage running its list with blocking receives) ends
 *    without deadlock, each receive getting the micro-batch it expects, both with
 *    sends that complete at once (buffered) and with sends that complete only when
 *    received (rendezvous) under the stage runtime's rules for reusing a stash slot.
 * Option text: --schedule and --partition errors name the option.
 * Partition: bp_partition_balance's slowest stage equals the best over all
 * contiguous splits (brute force) for random, equal, zero and lopsided costs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "parallel/partition.h"
#include "parallel/schedule.h"

enum { MAX_S = 8, MAX_M = 12, MAX_OPS = 2 * MAX_M, GUARD = 4 };

static int min_int(int a, int b) { return a < b ? a : b; }

/* Every schedule to try for M micro-batches: gpipe, 1f1b, afp:0..M+2. */
static int schedules_for(int M, bp_schedule *out) {
    int n = 0;
    out[n++] = (bp_schedule){BP_SCHED_GPIPE, 0};
    out[n++] = (bp_schedule){BP_SCHED_1F1B, 0};
    for (int k = 0; k <= M + 2; k++) out[n++] = (bp_schedule){BP_SCHED_AFP, k};
    return n;
}

static const char *name_of(const bp_schedule *sc) {
    static char buf[32];
    bp_schedule_name(sc, buf, sizeof buf);
    return buf;
}

/* The warm-up and peak the design gives for stage s of S. */
static int expected_warmup(const bp_schedule *sc, int S, int s, int M) {
    switch (sc->kind) {
    case BP_SCHED_GPIPE: return M;
    case BP_SCHED_1F1B: return min_int(M, S - s - 1);
    default: return min_int(M, S - s - 1 + sc->k);
    }
}

static int expected_peak(const bp_schedule *sc, int S, int s, int M) {
    switch (sc->kind) {
    case BP_SCHED_GPIPE: return M;
    case BP_SCHED_1F1B: return min_int(M, S - s);
    default: return min_int(M, S - s + sc->k);
    }
}

/* The ops of stage s, with a guard after them that must stay untouched. */
static void ops_of(const bp_schedule *sc, int S, int s, int M, bp_pipe_op *ops) {
    for (int i = 0; i < MAX_OPS + GUARD; i++) ops[i] = (bp_pipe_op){true, -77, false};
    bp_schedule_ops(sc, S, s, M, ops);
    for (int i = 2 * M; i < 2 * M + GUARD; i++)
        if (ops[i].micro != -77)
            fail_msg("%s S=%d s=%d M=%d: wrote past 2M ops (op %d)", name_of(sc), S, s, M, i);
}

/* Checks one stage's list; returns the most micro-batches held at once. */
static int check_ops(const bp_schedule *sc, int S, int s, int M, const bp_pipe_op *ops) {
    const char *nm = name_of(sc);
    int next_f = 0, next_b = 0, held = 0, peak = 0;
    bool done_f[MAX_M] = {0}, done_b[MAX_M] = {0};
    for (int i = 0; i < 2 * M; i++) {
        int m = ops[i].micro;
        if (m < 0 || m >= M)
            fail_msg("%s S=%d s=%d M=%d: op %d has micro-batch %d", nm, S, s, M, i, m);
        if (ops[i].forward) {
            if (done_f[m]) fail_msg("%s S=%d s=%d M=%d: forward of %d twice", nm, S, s, M, m);
            if (m != next_f)
                fail_msg("%s S=%d s=%d M=%d: op %d forwards %d, expected %d", nm, S, s, M, i, m,
                         next_f);
            done_f[m] = true;
            next_f++;
            if (++held > peak) peak = held;
        } else {
            if (!done_f[m])
                fail_msg("%s S=%d s=%d M=%d: backward of %d before its forward", nm, S, s, M, m);
            if (done_b[m]) fail_msg("%s S=%d s=%d M=%d: backward of %d twice", nm, S, s, M, m);
            if (m != next_b)
                fail_msg("%s S=%d s=%d M=%d: op %d backwards %d, expected %d", nm, S, s, M, i, m,
                         next_b);
            done_b[m] = true;
            next_b++;
            held--;
        }
    }
    if (next_f != M || next_b != M)
        fail_msg("%s S=%d s=%d M=%d: %d forwards and %d backwards", nm, S, s, M, next_f, next_b);
    /* Shape: w forwards, then F B in turn while forwards remain, then Bs. */
    int w = expected_warmup(sc, S, s, M), i = 0;
    for (; i < w; i++)
        if (!ops[i].forward)
            fail_msg("%s S=%d s=%d M=%d: op %d is a backward inside the %d warm-up forwards", nm, S,
                     s, M, i, w);
    for (int f = w; f < M; f++, i += 2)
        if (!ops[i].forward || ops[i + 1].forward)
            fail_msg("%s S=%d s=%d M=%d: ops %d, %d are not one forward and one backward", nm, S, s,
                     M, i, i + 1);
    for (; i < 2 * M; i++)
        if (ops[i].forward) fail_msg("%s S=%d s=%d M=%d: forward %d in the drain", nm, S, s, M, i);
    return peak;
}

static void test_ops_order_warmup_and_peak(void **state) {
    (void)state;
    bp_pipe_op ops[MAX_OPS + GUARD];
    bp_schedule scheds[MAX_M + 5];
    int checked = 0;
    for (int S = 1; S <= MAX_S; S++)
        for (int s = 0; s < S; s++)
            for (int M = 1; M <= MAX_M; M++) {
                int n = schedules_for(M, scheds);
                for (int j = 0; j < n; j++) {
                    const bp_schedule *sc = &scheds[j];
                    int w = bp_schedule_warmup(sc, S, s, M);
                    if (w != expected_warmup(sc, S, s, M))
                        fail_msg("%s S=%d s=%d M=%d: warm-up %d, expected %d", name_of(sc), S, s, M,
                                 w, expected_warmup(sc, S, s, M));
                    ops_of(sc, S, s, M, ops);
                    int peak = check_ops(sc, S, s, M, ops);
                    int claimed = bp_schedule_peak_stash(sc, S, s, M);
                    if (peak != claimed || peak != expected_peak(sc, S, s, M))
                        fail_msg("%s S=%d s=%d M=%d: holds %d at once, peak_stash says %d, "
                                 "expected %d",
                                 name_of(sc), S, s, M, peak, claimed, expected_peak(sc, S, s, M));
                    checked++;
                }
            }
    assert_true(checked > 1000);
}

/* With M >= S - s, 1f1b holds exactly S - s (the number in the issue, no min). */
static void test_1f1b_peak_is_stages_left(void **state) {
    (void)state;
    bp_schedule f = {BP_SCHED_1F1B, 0};
    for (int S = 1; S <= MAX_S; S++)
        for (int s = 0; s < S; s++)
            for (int M = S - s; M <= MAX_M; M++)
                assert_int_equal(bp_schedule_peak_stash(&f, S, s, M), S - s);
}

static bool same_ops(const bp_pipe_op *a, const bp_pipe_op *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].forward != b[i].forward || a[i].micro != b[i].micro) return false;
    return true;
}

static void test_afp_limits(void **state) {
    (void)state;
    bp_pipe_op a[MAX_OPS + GUARD], b[MAX_OPS + GUARD];
    bp_schedule gpipe = {BP_SCHED_GPIPE, 0}, f1b1 = {BP_SCHED_1F1B, 0};
    for (int S = 1; S <= MAX_S; S++)
        for (int s = 0; s < S; s++)
            for (int M = 1; M <= MAX_M; M++) {
                bp_schedule afp0 = {BP_SCHED_AFP, 0};
                ops_of(&afp0, S, s, M, a);
                ops_of(&f1b1, S, s, M, b);
                if (!same_ops(a, b, 2 * M))
                    fail_msg("afp:0 is not 1f1b at S=%d s=%d M=%d", S, s, M);
                ops_of(&gpipe, S, s, M, b);
                for (int k = M; k <= M + 2; k++) {
                    bp_schedule afp = {BP_SCHED_AFP, k};
                    ops_of(&afp, S, s, M, a);
                    if (!same_ops(a, b, 2 * M))
                        fail_msg("afp:%d is not gpipe at S=%d s=%d M=%d", k, S, s, M);
                }
                /* Between them, more advance never holds fewer. */
                for (int k = 1; k <= M; k++) {
                    bp_schedule lo = {BP_SCHED_AFP, k - 1}, hi = {BP_SCHED_AFP, k};
                    assert_true(bp_schedule_peak_stash(&lo, S, s, M) <=
                                bp_schedule_peak_stash(&hi, S, s, M));
                }
            }
}

/* ---- the whole pipeline ------------------------------------------------------------
 * Stage s runs its ops; a forward receives the activation of its micro-batch from
 * s - 1 (blocking) and sends its output to s + 1 (non-blocking); a backward
 * receives the output gradient from s + 1 and sends the input gradient to s - 1.
 * Messages between two stages in one direction are matched in order (one tag).
 *
 * Buffered: a send completes at once. Rendezvous: a send completes when the peer
 * receives it, and the stage runtime's rules apply: a forward takes a free stash
 * slot (slots = peak stash) and waits for that slot's previous activation send
 * before overwriting its output; a backward waits for its slot's previous gradient
 * send before overwriting it. Several steps run back to back. */

enum { STEPS = 2, MAX_MSG = MAX_S * 2 * MAX_M * STEPS };

typedef struct msg {
    int micro, step;
    bool received;
} msg;

typedef struct sim_slot {
    int micro;    /* -1: free */
    int fwd, bwd; /* message of the last send from this slot, -1: none */
} sim_slot;

typedef struct sim_stage {
    const bp_pipe_op *ops;
    int n_ops, at, step, phase; /* phase 0: before the op's waits, 1: waiting to receive */
    sim_slot slots[MAX_M];
    int n_slots, cur; /* cur: slot of the op in progress */
} sim_stage;

typedef struct sim {
    int S;
    bool rendezvous;
    sim_stage st[MAX_S];
    msg msgs[MAX_MSG];
    int n_msgs;
    /* queue[dir][s]: messages sent on a link, oldest first; dir 0: s -> s+1
     * (activations), dir 1: s+1 -> s (gradients). */
    int queue[2][MAX_S][MAX_MSG];
    int q_head[2][MAX_S], q_tail[2][MAX_S];
    char error[256]; /* why the pipeline did not complete; empty if it did */
} sim;

static bool send_done(const sim *x, int id) {
    return id < 0 || !x->rendezvous || x->msgs[id].received;
}

static int post(sim *x, int dir, int link, int micro, int step) {
    int id = x->n_msgs++;
    assert_true(id < MAX_MSG);
    x->msgs[id] = (msg){micro, step, false};
    x->queue[dir][link][x->q_tail[dir][link]++] = id;
    return id;
}

/* Receive on a link if a message is there; it must be the expected micro-batch. */
static bool try_recv(sim *x, int dir, int link, int micro, int step, int s) {
    if (x->q_head[dir][link] == x->q_tail[dir][link]) return false;
    int id = x->queue[dir][link][x->q_head[dir][link]++];
    if (x->msgs[id].micro != micro || x->msgs[id].step != step)
        snprintf(x->error, sizeof x->error,
                 "stage %d received the %s of micro-batch %d of step %d for micro-batch %d of "
                 "step %d",
                 s, dir ? "gradient" : "activation", x->msgs[id].micro, x->msgs[id].step, micro,
                 step);
    x->msgs[id].received = true;
    return true;
}

/* Advance stage s as far as it can go; true if it did anything. */
static bool advance(sim *x, int s) {
    sim_stage *st = &x->st[s];
    bool moved = false;
    while (st->step < STEPS && !x->error[0]) {
        const bp_pipe_op *op = &st->ops[st->at];
        int m = op->micro;
        if (st->phase == 0) {
            int c = -1;
            if (op->forward) {
                for (int i = 0; i < st->n_slots && c < 0; i++)
                    if (st->slots[i].micro < 0) c = i;
                if (c < 0) {
                    snprintf(x->error, sizeof x->error, "stage %d has no free slot for F%d", s, m);
                    return moved;
                }
                if (!send_done(x, st->slots[c].fwd)) return moved;
                st->slots[c].micro = m;
            } else {
                for (int i = 0; i < st->n_slots && c < 0; i++)
                    if (st->slots[i].micro == m) c = i;
                if (c < 0) {
                    snprintf(x->error, sizeof x->error, "stage %d holds nothing for B%d", s, m);
                    return moved;
                }
                if (!send_done(x, st->slots[c].bwd)) return moved;
            }
            st->cur = c;
            st->phase = 1;
            moved = true;
        }
        sim_slot *sl = &st->slots[st->cur];
        if (op->forward) {
            if (s > 0 && !try_recv(x, 0, s - 1, m, st->step, s)) return moved;
            if (s < x->S - 1) sl->fwd = post(x, 0, s, m, st->step);
        } else {
            if (s < x->S - 1 && !try_recv(x, 1, s, m, st->step, s)) return moved;
            sl->micro = -1;
            if (s > 0) sl->bwd = post(x, 1, s - 1, m, st->step);
        }
        st->phase = 0;
        moved = true;
        if (++st->at == st->n_ops) st->at = 0, st->step++;
    }
    return moved;
}

/* Runs stages with the given ops (ops[s], 2M each) and slots for STEPS steps; the
 * reason it did not complete in x->error, or "" when it did. */
static void run_pipeline(sim *x, int S, int M, bp_pipe_op (*ops)[MAX_OPS + GUARD],
                         const int *n_slots, bool rendezvous) {
    memset(x, 0, sizeof *x);
    x->S = S, x->rendezvous = rendezvous;
    for (int s = 0; s < S; s++) {
        sim_stage *st = &x->st[s];
        st->ops = ops[s];
        st->n_ops = 2 * M;
        st->n_slots = n_slots[s];
        for (int i = 0; i < MAX_M; i++) st->slots[i] = (sim_slot){-1, -1, -1};
    }
    for (;;) {
        bool moved = false, done = true;
        for (int s = 0; s < S && !x->error[0]; s++) {
            moved |= advance(x, s);
            done &= x->st[s].step == STEPS;
        }
        if (x->error[0] || done) break;
        if (!moved) {
            size_t at = (size_t)snprintf(x->error, sizeof x->error, "deadlock at");
            for (int s = 0; s < S && at < sizeof x->error; s++) {
                const sim_stage *st = &x->st[s];
                const bp_pipe_op *op = &st->ops[st->at];
                int k = snprintf(x->error + at, sizeof x->error - at, " [stage %d: step %d %c%d]",
                                 s, st->step, op->forward ? 'F' : 'B', op->micro);
                at += k > 0 ? (size_t)k : 0;
            }
            return;
        }
    }
    for (int d = 0; d < 2 && !x->error[0]; d++)
        for (int s = 0; s < S; s++)
            if (x->q_head[d][s] != x->q_tail[d][s])
                snprintf(x->error, sizeof x->error, "messages left unreceived on link %d", s);
}

static sim the_sim;
static bp_pipe_op the_ops[MAX_S][MAX_OPS + GUARD];

static void test_pipeline_completes(void **state) {
    (void)state;
    bp_schedule scheds[MAX_M + 5];
    int slots[MAX_S];
    for (int S = 1; S <= MAX_S; S++)
        for (int M = 1; M <= MAX_M; M++) {
            int n = schedules_for(M, scheds);
            for (int j = 0; j < n; j++) {
                const bp_schedule *sc = &scheds[j];
                for (int s = 0; s < S; s++) {
                    ops_of(sc, S, s, M, the_ops[s]);
                    slots[s] = bp_schedule_peak_stash(sc, S, s, M);
                }
                for (int rv = 0; rv < 2; rv++) {
                    run_pipeline(&the_sim, S, M, the_ops, slots, rv);
                    if (the_sim.error[0])
                        fail_msg("%s S=%d M=%d, %s sends: %s", name_of(sc), S, M,
                                 rv ? "rendezvous" : "buffered", the_sim.error);
                }
            }
        }
}

/* The simulation can fail: orders and slot counts that are wrong are caught. */
static void test_simulation_catches_bad_pipelines(void **state) {
    (void)state;
    bp_schedule gpipe = {BP_SCHED_GPIPE, 0}, f1b1 = {BP_SCHED_1F1B, 0};
    int slots[MAX_S] = {2, 2, 2, 2};
    /* Stage 0 waits for the gradient of 0 before sending 1; stage 1 wants 1 first. */
    ops_of(&f1b1, 2, 1, 2, the_ops[0]);  /* F0 B0 F1 B1 */
    ops_of(&gpipe, 2, 1, 2, the_ops[1]); /* F0 F1 B0 B1 */
    run_pipeline(&the_sim, 2, 2, the_ops, slots, false);
    if (!strstr(the_sim.error, "deadlock")) fail_msg("not a deadlock: '%s'", the_sim.error);
    /* The last stage drains in the wrong order: stage 0 gets the wrong gradient. */
    ops_of(&gpipe, 2, 0, 2, the_ops[0]);
    ops_of(&gpipe, 2, 1, 2, the_ops[1]);
    the_ops[1][2].micro = 1, the_ops[1][3].micro = 0;
    run_pipeline(&the_sim, 2, 2, the_ops, slots, false);
    if (!strstr(the_sim.error, "received the gradient of micro-batch 1"))
        fail_msg("wrong order not caught: '%s'", the_sim.error);
    /* One slot fewer than the schedule's peak. */
    for (int s = 0; s < 3; s++) {
        ops_of(&f1b1, 3, s, 4, the_ops[s]);
        slots[s] = bp_schedule_peak_stash(&f1b1, 3, s, 4);
    }
    slots[0]--;
    run_pipeline(&the_sim, 3, 4, the_ops, slots, false);
    if (!strstr(the_sim.error, "no free slot"))
        fail_msg("missing slot not caught: '%s'", the_sim.error);
    slots[0]++;
    run_pipeline(&the_sim, 3, 4, the_ops, slots, true);
    assert_string_equal(the_sim.error, "");
}

/* ---- option text ------------------------------------------------------------------ */

static void test_schedule_parse(void **state) {
    (void)state;
    const char *good[] = {"gpipe", "1f1b", "afp:0", "afp:1", "afp:7", "afp:123"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        bp_schedule sc;
        bp_err err = {0};
        if (bp_schedule_parse(good[i], &sc, &err) != BP_OK)
            fail_msg("'%s' refused: %s", good[i], err.msg);
        char buf[32];
        bp_schedule_name(&sc, buf, sizeof buf);
        if (strcmp(buf, good[i]) != 0) fail_msg("'%s' named back as '%s'", good[i], buf);
    }
    bp_schedule sc;
    assert_int_equal(bp_schedule_parse("afp:3", &sc, NULL), BP_OK);
    assert_int_equal(sc.kind, BP_SCHED_AFP);
    assert_int_equal(sc.k, 3);
    const char *bad[] = {"zigzag", "afp:-1", "afp:",    "afp",
                         "afp:x",  "afp:1x", "afp:1.5", "",
                         "GPIPE",  "1F1B",   "gpipe ",  "afp:99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bp_err err = {0};
        int rc = bp_schedule_parse(bad[i], &sc, &err);
        if (rc != BP_EUSAGE) fail_msg("'%s' gave %d, expected a usage error", bad[i], rc);
        if (!strstr(err.msg, "option --schedule") || !strstr(err.msg, bad[i]))
            fail_msg("'%s': message '%s' does not name --schedule and the text", bad[i], err.msg);
        /* NULL err is allowed too. */
        assert_int_equal(bp_schedule_parse(bad[i], &sc, NULL), BP_EUSAGE);
    }
}

static void test_partition_parse(void **state) {
    (void)state;
    int first[MAX_S + 2];
    bp_err err = {0};
    assert_int_equal(bp_partition_parse("2,3,3", 8, 3, first, &err), BP_OK);
    int want[] = {0, 2, 5, 8};
    for (int i = 0; i <= 3; i++) assert_int_equal(first[i], want[i]);
    char buf[64];
    bp_partition_format(first, 3, buf, sizeof buf);
    assert_string_equal(buf, "2,3,3");
    assert_int_equal(bp_partition_parse("4", 4, 1, first, &err), BP_OK);
    assert_int_equal(first[1], 4);
    assert_int_equal(bp_partition_parse("1,1,1,1", 4, 4, first, &err), BP_OK);
    bp_partition_format(first, 4, buf, sizeof buf);
    assert_string_equal(buf, "1,1,1,1");

    const struct {
        const char *text;
        int n, S;
    } bad[] = {
        {"1,1", 4, 3},     /* too few counts */
        {"1,1,1,1", 4, 3}, /* too many */
        {"2,3,4", 8, 3},   /* sums to 9 */
        {"1,1,1", 8, 3},   /* sums to 3 */
        {"0,4,4", 8, 3},   /* an empty stage */
        {"-1,5,4", 8, 3},  /* negative */
        {"a,b,c", 8, 3},   /* not numbers */
        {"2,,6", 8, 3},    /* empty field */
        {"2,3,3,", 8, 3},  /* trailing comma */
        {"2;3;3", 8, 3},   /* other separator */
        {"", 8, 3},        /* nothing */
        {"9", 8, 1},       /* more than the model has */
        {"99999999999999999999,1", 8, 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bp_err e = {0};
        int rc = bp_partition_parse(bad[i].text, bad[i].n, bad[i].S, first, &e);
        if (rc != BP_EUSAGE)
            fail_msg("--partition '%s' (S=%d, %d blocks) gave %d", bad[i].text, bad[i].S, bad[i].n,
                     rc);
        if (!strstr(e.msg, "block count") && !strstr(e.msg, "covers"))
            fail_msg("--partition '%s': message '%s' does not say what is wrong", bad[i].text,
                     e.msg);
    }
    /* The wrong sum says how many blocks the model has. */
    bp_err e = {0};
    bp_partition_parse("2,3,4", 8, 3, first, &e);
    if (!strstr(e.msg, "8")) fail_msg("message '%s' does not give the model's 8 blocks", e.msg);
}

/* ---- balanced partition ------------------------------------------------------------ */

/* Largest stage cost of a split. */
static double worst_stage(const double *cost, const int *first, int S) {
    double worst = 0;
    for (int s = 0; s < S; s++) {
        double c = 0;
        for (int b = first[s]; b < first[s + 1]; b++) c += cost[b];
        if (c > worst) worst = c;
    }
    return worst;
}

/* Best largest stage cost over every split of blocks [from, n) into S stages. */
static double brute_force(const double *cost, int from, int n, int S, int *first, int s0,
                          int *best_first, double *best) {
    if (S == 1) {
        first[s0] = from;
        first[s0 + 1] = n;
        double w = worst_stage(cost, first, s0 + 1);
        if (w < *best) {
            *best = w;
            memcpy(best_first, first, sizeof(int) * (size_t)(s0 + 2));
        }
        return *best;
    }
    for (int end = from + 1; end <= n - (S - 1); end++) {
        first[s0] = from;
        brute_force(cost, end, n, S - 1, first, s0 + 1, best_first, best);
    }
    return *best;
}

static void check_balance(const double *cost, int n, int S, const char *kind) {
    int first[MAX_S + 2], tmp[MAX_S + 2], best_first[MAX_S + 2];
    for (int i = 0; i < MAX_S + 2; i++) first[i] = -1;
    bp_partition_balance(cost, n, S, first);
    if (first[0] != 0 || first[S] != n)
        fail_msg("%s n=%d S=%d: split starts %d ends %d", kind, n, S, first[0], first[S]);
    for (int s = 0; s < S; s++)
        if (first[s + 1] <= first[s]) fail_msg("%s n=%d S=%d: stage %d is empty", kind, n, S, s);
    double best = INFINITY;
    brute_force(cost, 0, n, S, tmp, 0, best_first, &best);
    double got = worst_stage(cost, first, S);
    if (got > best * (1 + 1e-12) + 1e-300) {
        char a[64], b[64];
        bp_partition_format(first, S, a, sizeof a);
        bp_partition_format(best_first, S, b, sizeof b);
        fail_msg("%s n=%d S=%d: slowest stage %.17g with %s, but %s gives %.17g", kind, n, S, got,
                 a, b, best);
    }
}

static void test_balance_is_optimal(void **state) {
    (void)state;
    bp_rng r;
    bp_rng_seed(&r, 42, 0);
    double cost[16];
    for (int n = 1; n <= 11; n++)
        for (int S = 1; S <= n && S <= MAX_S; S++) {
            for (int trial = 0; trial < 25; trial++) {
                for (int b = 0; b < n; b++) cost[b] = bp_rng_uniform(&r);
                check_balance(cost, n, S, "uniform");
                /* gpt-like: cheap embedding, blocks alike, expensive head */
                for (int b = 0; b < n; b++) cost[b] = 1 + 0.1 * bp_rng_uniform(&r);
                cost[0] = 0.05, cost[n - 1] = 2.5 * bp_rng_uniform(&r);
                check_balance(cost, n, S, "gpt-like");
                /* heavy-tailed */
                for (int b = 0; b < n; b++) cost[b] = exp(4 * bp_rng_normal(&r));
                check_balance(cost, n, S, "lopsided");
            }
            for (int b = 0; b < n; b++) cost[b] = 1;
            check_balance(cost, n, S, "equal");
            for (int b = 0; b < n; b++) cost[b] = 0;
            check_balance(cost, n, S, "zero");
            for (int b = 0; b < n; b++) cost[b] = b == n / 2 ? 100 : 1e-3;
            check_balance(cost, n, S, "one giant");
        }
}

/* Equal blocks on equal stages: the split is as even as it can be. */
static void test_balance_equal_blocks(void **state) {
    (void)state;
    double cost[12];
    for (int i = 0; i < 12; i++) cost[i] = 1;
    int first[5];
    bp_partition_balance(cost, 12, 4, first);
    for (int s = 0; s < 4; s++) assert_int_equal(first[s + 1] - first[s], 3);
    bp_partition_balance(cost, 12, 1, first);
    assert_int_equal(first[0], 0);
    assert_int_equal(first[1], 12);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_order_warmup_and_peak),
        cmocka_unit_test(test_1f1b_peak_is_stages_left),
        cmocka_unit_test(test_afp_limits),
        cmocka_unit_test(test_pipeline_completes),
        cmocka_unit_test(test_simulation_catches_bad_pipelines),
        cmocka_unit_test(test_schedule_parse),
        cmocka_unit_test(test_partition_parse),
        cmocka_unit_test(test_balance_is_optimal),
        cmocka_unit_test(test_balance_equal_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

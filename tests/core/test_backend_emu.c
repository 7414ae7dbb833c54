/* core/backend_emu: the emulated device's timeline, checked on a virtual clock (no
 * test here depends on the machine's speed): an operation starts at the later of
 * its issue and its stream's busy time, kernels of different streams run one at a
 * time and interleave at kernel boundaries, copies overlap kernels, the host's
 * waits end exactly when the timeline reaches them (read again when they wake),
 * durations stretch by the dilation, a wait runs the progress hook while it says
 * messages are in flight; and memory past the device's capacity is
 * refused with the need and the capacity. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/backend_emu.h"

#define GiB 1073741824.0

/* A device of round numbers: 1 GB/s of memory and host link, no launch overhead. */
static const bp_device_sheet sheet = {.name = "test", .title = "Test-GPU", .fp32_flops = 1e12,
                                      .tf32_flops = 1e12, .mem_Bps = 1e9,
                                      .mem_bytes = 2 * GiB, .launch_s = 0, .host_Bps = 1e9};

/* The virtual clock: now is t; sleeping until u sets t to u. A sleep that passes
 * `at` first runs `then` at that time (once): what another thread does while the
 * host sleeps. */
typedef struct vclock {
    double t;
    int sleeps;
    double at;
    void (*then)(struct vclock *c);
    void *arg, *arg2;
} vclock;
static double v_now(void *ctx) { return ((vclock *)ctx)->t; }
static void v_sleep(void *ctx, double u) {
    vclock *c = ctx;
    c->sleeps++;
    if (c->then && c->t <= c->at && u > c->at) {
        void (*then)(vclock *) = c->then;
        c->then = NULL;
        c->t = c->at;
        then(c);
    }
    if (u > c->t) c->t = u;
}

/* Times that sums of durations reach, to rounding. */
static void assert_near(double x, double y) { assert_true(fabs(x - y) < 1e-9); }

static bp_backend *make(vclock *c, double dilation) {
    bp_emu_config cfg = {.sheet = &sheet,
                         .rate = {.flops = 1e12, .mem_Bps = 1e9, .efficiency = 1, .launch_s = 0},
                         .dilation = dilation,
                         .clock = {v_now, v_sleep, c}};
    bp_backend *be = NULL;
    bp_err err;
    assert_int_equal(bp_backend_emu_create(&cfg, &be, &err), BP_OK);
    assert_true(bp_backend_is_emu(be));
    return be;
}

static void start_is_issue_or_stream_busy(void **state) {
    (void)state;
    vclock c = {0};
    bp_backend *be = make(&c, 1);
    bp_backend_emu_kernel(be, NULL, 1.0);
    assert_true(bp_backend_emu_busy(be, NULL) == 1.0); /* idle: starts at issue */
    c.t = 0.5;
    bp_backend_emu_kernel(be, NULL, 1.0);
    assert_true(bp_backend_emu_busy(be, NULL) == 2.0); /* behind the first */
    c.t = 5;
    bp_backend_emu_kernel(be, NULL, 1.0);
    assert_true(bp_backend_emu_busy(be, NULL) == 6.0); /* idle again */
    assert_true(c.t == 5); /* the host returned at once every time */
    uint64_t k = bp_backend_emu_kernel(be, NULL, 0.5);
    bp_backend_emu_sync(be, k); /* sleeps until it has run */
    assert_true(c.t == 6.5);
    bp_backend_emu_sync(be, k); /* over: returns at once */
    assert_true(c.sleeps == 1);
    bp_backend_emu_destroy(be);
}

/* A device of the virtual clock c with two streams a and b and an event e. */
typedef struct two_streams {
    vclock c;
    bp_backend *be;
    bp_dev_stream *a, *b;
    bp_dev_event *e;
} two_streams;

static bp_backend *two_streams_open(two_streams *t) {
    bp_err err;
    *t = (two_streams){0};
    t->be = make(&t->c, 1);
    assert_int_equal(t->be->stream_create(t->be, &t->a, &err), BP_OK);
    assert_int_equal(t->be->stream_create(t->be, &t->b, &err), BP_OK);
    assert_int_equal(t->be->event_create(t->be, &t->e, &err), BP_OK);
    return t->be;
}

static void two_streams_close(two_streams *t) {
    t->be->event_destroy(t->be, t->e);
    t->be->stream_destroy(t->be, t->a);
    t->be->stream_destroy(t->be, t->b);
    bp_backend_emu_destroy(t->be);
}

static void one_kernel_at_a_time_across_streams(void **state) {
    (void)state;
    two_streams t;
    bp_backend *be = two_streams_open(&t);
    bp_err err;
    bp_backend_emu_kernel(be, t.a, 1.0);
    assert_true(bp_backend_emu_busy(be, t.a) == 1.0);
    bp_backend_emu_kernel(be, t.b, 0.25);
    assert_true(bp_backend_emu_busy(be, t.b) == 1.25); /* b was idle, the device not */
    assert_true(bp_backend_emu_busy(be, t.a) == 1.0);
    assert_int_equal(be->event_record(be, t.e, t.b, &err), BP_OK);
    assert_true(t.c.t == 0);
    assert_int_equal(be->event_sync(be, t.e, &err), BP_OK);
    assert_true(t.c.t == 1.25); /* the host slept until the event */
    /* a stream that waits for an event starts after it */
    assert_int_equal(be->stream_wait(be, t.a, t.e, &err), BP_OK);
    t.c.t = 1.0;
    assert_true(bp_backend_emu_busy(be, t.a) == 1.25);
    two_streams_close(&t);
}

/* The step's stream queues ten kernels of 1 s at 0 (a backward issued at once);
 * at 2.5 another stream (the communication thread's) issues one of 0.1 s. The
 * device runs it at the next kernel boundary, 3, not after the ten: among the
 * streams' next kernels it starts the one ready longest. */
static void other_stream_runs_at_next_kernel_boundary(void **state) {
    (void)state;
    two_streams t;
    bp_backend *be = two_streams_open(&t);
    bp_err err;
    for (int k = 0; k < 10; k++) bp_backend_emu_kernel(be, t.a, 1.0);
    assert_near(bp_backend_emu_busy(be, t.a), 10.0);
    t.c.t = 2.5;
    bp_backend_emu_kernel(be, t.b, 0.1);
    assert_near(bp_backend_emu_busy(be, t.b), 3.1);
    assert_near(bp_backend_emu_busy(be, t.a), 10.1); /* a's fourth kernel ran after it */
    assert_int_equal(be->event_record(be, t.e, t.b, &err), BP_OK);
    assert_int_equal(be->event_sync(be, t.e, &err), BP_OK);
    assert_near(t.c.t, 3.1);
    /* two kernels at once on b alternate with a's: b, a, b */
    bp_backend_emu_kernel(be, t.b, 0.1);
    bp_backend_emu_kernel(be, t.b, 0.1);
    assert_near(bp_backend_emu_busy(be, t.b), 5.3);
    assert_near(bp_backend_emu_busy(be, t.a), 10.3);
    two_streams_close(&t);
}

/* Issued while the host sleeps for a's fourth kernel (due at 4), b's kernel runs
 * before it: the host wakes at 4, finds it moved to 4.1, and sleeps again. */
static void issue_b(vclock *c) { bp_backend_emu_kernel(c->arg, c->arg2, 0.1); }

static void a_wait_rechecks_a_moved_completion(void **state) {
    (void)state;
    two_streams t;
    bp_backend *be = two_streams_open(&t);
    bp_err err;
    for (int k = 0; k < 4; k++) bp_backend_emu_kernel(be, t.a, 1.0);
    assert_int_equal(be->event_record(be, t.e, t.a, &err), BP_OK);
    for (int k = 0; k < 6; k++) bp_backend_emu_kernel(be, t.a, 1.0);
    t.c.at = 2.5, t.c.then = issue_b, t.c.arg = be, t.c.arg2 = t.b;
    assert_int_equal(be->event_sync(be, t.e, &err), BP_OK);
    assert_near(t.c.t, 4.1);
    assert_true(t.c.sleeps == 2);
    assert_near(bp_backend_emu_busy(be, t.b), 3.1);
    two_streams_close(&t);
}

/* 1024 kernels queued fill the launch queue: the next issue waits for the first to
 * end, as a GPU's host blocks on a full queue. */
static void a_full_launch_queue_blocks_the_host(void **state) {
    (void)state;
    vclock c = {0};
    bp_backend *be = make(&c, 1);
    for (int k = 0; k < 1024; k++) bp_backend_emu_kernel(be, NULL, 1.0);
    assert_true(c.t == 0);
    bp_backend_emu_kernel(be, NULL, 1.0);
    assert_true(c.t == 1.0);
    assert_true(bp_backend_emu_busy(be, NULL) == 1025.0);
    bp_backend_emu_destroy(be);
}

static void copies_overlap_kernels(void **state) {
    (void)state;
    vclock c = {0};
    bp_backend *be = make(&c, 1);
    bp_dev_stream *s;
    bp_err err;
    void *d = NULL;
    float host[4] = {1, 2, 3, 4};
    assert_int_equal(be->alloc(be, &d, (size_t)1e9, "buffer", &err), BP_OK);
    assert_int_equal(be->stream_create(be, &s, &err), BP_OK);
    bp_backend_emu_kernel(be, s, 2.0);
    assert_true(bp_backend_emu_busy(be, s) == 2.0);
    be->to_device(be, d, host, (size_t)1e9); /* 1 s on the link, beside the kernel */
    assert_true(c.t == 1.0);
    be->to_device(be, d, host, (size_t)5e8); /* the link's engine is free again at 1 */
    assert_true(c.t == 1.5);
    be->to_host(be, host, d, sizeof host); /* values are not computed: zeros */
    for (int i = 0; i < 4; i++) assert_true(host[i] == 0);
    /* a kernel of this thread's default stream waits for its copies, not for s */
    bp_backend_emu_kernel(be, NULL, 1.0);
    assert_true(bp_backend_emu_busy(be, NULL) == 3.0); /* the device is busy to 2 */
    be->stream_destroy(be, s);
    be->free(be, d);
    bp_backend_emu_destroy(be);
}

static void results_wait_and_passes_take_their_bytes(void **state) {
    (void)state;
    vclock c = {0};
    bp_backend *be = make(&c, 4);
    void *d = NULL;
    bp_err err;
    size_t n = 250000000; /* 1e9 bytes of floats */
    assert_int_equal(be->alloc(be, &d, n * sizeof(float), "buffer", &err), BP_OK);
    be->scale(be, d, n, 2.0f); /* reads and writes: 2 s, dilated to 8 */
    assert_true(c.t == 0);
    assert_true(bp_backend_emu_busy(be, NULL) == 8.0);
    assert_true(be->all_finite(be, d, n)); /* reads: 1 s more, dilated, and waits */
    assert_true(c.t == 12.0);
    assert_true(be->sumsq(be, d, n) == 0);
    assert_true(c.t == 16.0);
    be->free(be, d);
    bp_backend_emu_destroy(be);
}

/* A progress hook with messages in flight until its `calls` reach `busy`, noting
 * the clock's time at each call. */
typedef struct hook {
    vclock *c;
    int calls, busy;
    double at[16];
} hook;
static bool note(void *ctx) {
    hook *h = ctx;
    if (h->calls < 16) h->at[h->calls] = h->c->t;
    return ++h->calls < h->busy;
}

static void a_wait_drives_progress_while_messages_are_in_flight(void **state) {
    (void)state;
    vclock c = {0};
    bp_backend *be = make(&c, 1);
    hook h = {.c = &c, .busy = 3};
    bp_backend_emu_set_progress(be, &(bp_emu_progress){note, &h, 0.25});
    /* in flight for 3 calls (at 0, 0.25, 0.5); then no more calls: one sleep to 2 */
    bp_backend_emu_sync(be, bp_backend_emu_kernel(be, NULL, 2.0));
    assert_true(c.t == 2.0);
    assert_int_equal(h.calls, 3);
    assert_true(h.at[0] == 0 && h.at[1] == 0.25 && h.at[2] == 0.5);
    assert_int_equal(c.sleeps, 3);
    /* a wait that is over calls nothing; a hook taken away is not called */
    bp_backend_emu_sync(be, bp_backend_emu_kernel(be, NULL, 0));
    bp_backend_emu_set_progress(be, NULL);
    bp_backend_emu_sync(be, bp_backend_emu_kernel(be, NULL, 1.0));
    assert_int_equal(h.calls, 3);
    assert_true(c.t == 3.0);
    bp_backend_emu_destroy(be);
}

static void memory_past_capacity_is_refused(void **state) {
    (void)state;
    vclock c = {0};
    bp_backend *be = make(&c, 1);
    void *a = NULL, *b = NULL;
    bp_err err;
    assert_int_equal(be->alloc(be, &a, (size_t)GiB, "parameters", &err), BP_OK);
    assert_true(be->owns(be, (char *)a + 100));
    assert_int_equal(be->alloc(be, &b, (size_t)(1.5 * GiB), "activations", &err), BP_ENOMEM);
    assert_null(b);
    assert_string_equal(err.msg,
                        "emulated Test-GPU: out of memory allocating activations: needs at least "
                        "2.50 GiB, the device has 2.00 GiB");
    size_t peak;
    assert_true(bp_backend_emu_used(be, &peak) == (size_t)GiB && peak == (size_t)GiB);
    be->free(be, a);
    assert_int_equal(be->alloc(be, &b, (size_t)(1.5 * GiB), "activations", &err), BP_OK);
    be->free(be, b);
    bp_backend_emu_destroy(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(start_is_issue_or_stream_busy),
        cmocka_unit_test(one_kernel_at_a_time_across_streams),
        cmocka_unit_test(other_stream_runs_at_next_kernel_boundary),
        cmocka_unit_test(a_wait_rechecks_a_moved_completion),
        cmocka_unit_test(a_full_launch_queue_blocks_the_host),
        cmocka_unit_test(copies_overlap_kernels),
        cmocka_unit_test(results_wait_and_passes_take_their_bytes),
        cmocka_unit_test(a_wait_drives_progress_while_messages_are_in_flight),
        cmocka_unit_test(memory_past_capacity_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* core/backend: the cpu backend's operations follow their rules bit for bit, the
 * checking backend gives the same bits through its copies, and a host access to the
 * checking backend's memory outside its calls faults. */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/backend.h"
#include "core/rng.h"

enum { N = 1037 }; /* not a multiple of any vector width */

static void random_fill(float *x, size_t n, uint64_t seed) {
    bp_rng r;
    bp_rng_seed(&r, seed, 0);
    for (size_t i = 0; i < n; i++) x[i] = (float)bp_rng_normal(&r);
}

static void assert_same_bits(const float *a, const float *b, size_t n) {
    assert_memory_equal(a, b, n * sizeof(float));
}

/* A device buffer holding host[0..n). */
static float *upload(const bp_backend *be, const float *host, size_t n) {
    void *d = NULL;
    bp_err err;
    assert_int_equal(be->alloc(be, &d, n * sizeof(float), "test buffer", &err), BP_OK);
    bp_backend_put(be, d, host, n);
    return d;
}

static void download(const bp_backend *be, float *host, const float *dev, size_t n) {
    bp_backend_get(be, host, dev, n);
}

/* Each vector operation on `be` against the rule written out here. */
static void vector_ops_follow_rules(const bp_backend *be) {
    float x[N], y[N], w[N], c[N], d[N], got[N], want[N];
    random_fill(x, N, 1);
    random_fill(y, N, 2);
    float *dx = upload(be, x, N), *dy = upload(be, y, N);

    double s = 0;
    for (size_t i = 0; i < N; i++) s += (double)x[i] * (double)x[i];
    /* summed in another order than s (partial sums): the same float, close in double */
    double got_s = be->sumsq(be, dx, N);
    assert_true((float)got_s == (float)s && fabs(got_s - s) <= 1e-14 * s);
    assert_true(be->all_finite(be, dx, N));

    be->axpy(be, dy, N, 0.37f, dx);
    for (size_t i = 0; i < N; i++) want[i] = y[i] + 0.37f * x[i];
    download(be, got, dy, N);
    assert_same_bits(got, want, N);

    be->scale(be, dy + 5, N - 5, -1.5f); /* a range inside the buffer */
    for (size_t i = 5; i < N; i++) want[i] *= -1.5f;
    download(be, got, dy, N);
    assert_same_bits(got, want, N);

    be->fill(be, dy, 7, 2.0f);
    be->copy(be, dx + 7, dy, 7 * sizeof(float));
    download(be, got, dx, N);
    for (size_t i = 7; i < 14; i++) assert_true(got[i] == 2.0f);

    x[3] = NAN, x[900] = INFINITY;
    bp_backend_put(be, dx, x, N);
    assert_false(be->all_finite(be, dx, N));
    assert_true(be->all_finite(be, dx + 4, 890));
    assert_true(be->zero_nonfinite(be, dx, N));
    assert_false(be->zero_nonfinite(be, dx, N));
    download(be, got, dx, N);
    assert_true(got[3] == 0 && got[900] == 0 && got[4] == x[4]);

    random_fill(w, N, 3), random_fill(c, N, 4), random_fill(d, N, 5);
    float *dw = upload(be, w, N), *dc = upload(be, c, N), *dd = upload(be, d, N);
    be->elastic_pull(be, dw, dc, dd, N, 0.3f, true);
    float wantw[N];
    for (size_t i = 0; i < N; i++) {
        float k = 0.3f * (w[i] - c[i]);
        wantw[i] = w[i] - k;
        want[i] = d[i] + k;
    }
    download(be, got, dw, N);
    assert_same_bits(got, wantw, N);
    download(be, got, dd, N);
    assert_same_bits(got, want, N);
    be->free(be, dx), be->free(be, dy), be->free(be, dw), be->free(be, dc), be->free(be, dd);
}

/* AdamW over two ranges against nn/optim.h's rule written out in one pass. */
static void adamw_follows_rule(const bp_backend *be) {
    float p[N], g[N], want[N], got[N], zero[N] = {0};
    random_fill(p, N, 6), random_fill(g, N, 7);
    float *dp = upload(be, p, N), *dg = upload(be, g, N);
    float *dm = upload(be, zero, N), *dv = upload(be, zero, N);
    bp_update_args a = {.kind = BP_UPDATE_ADAMW, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95,
                        .eps = 1e-8, .weight_decay = 0.1, .t = 1};
    be->update(be, &a, dp, dg, dm, dv, 0, 500);
    be->update(be, &a, dp, dg, dm, dv, 500, N - 500);
    double bc1 = 1 - pow(0.9, 1), bc2 = 1 - pow(0.95, 1);
    float step = (float)(1e-3 / bc1), isb = (float)(1 / sqrt(bc2)), decay = (float)(1 - 1e-4);
    for (size_t i = 0; i < N; i++) {
        float m = 0.9f * 0 + (1 - 0.9f) * g[i], v = 0.95f * 0 + (1 - 0.95f) * g[i] * g[i];
        want[i] = p[i] * decay - step * m / (sqrtf(v) * isb + 1e-8f);
    }
    download(be, got, dp, N);
    assert_same_bits(got, want, N);
    be->free(be, dp), be->free(be, dg), be->free(be, dm), be->free(be, dv);
}

/* DiLoCo's outer step, replacing the weights (mix 0) and mixing them (mix 0.3), on
 * a range inside the buffers. */
static void outer_step_follows_rule(const bp_backend *be) {
    float g[N], m[N], d[N], w[N], wg[N], wm[N], ww[N], got[N];
    random_fill(g, N, 8), random_fill(m, N, 9), random_fill(d, N, 10), random_fill(w, N, 11);
    float *dg = upload(be, g, N), *dm = upload(be, m, N), *dd = upload(be, d, N);
    float *dw = upload(be, w, N);
    memcpy(wg, g, sizeof g), memcpy(wm, m, sizeof m), memcpy(ww, w, sizeof w);
    const float mix[2] = {0.0f, 0.3f};
    for (int k = 0; k < 2; k++) {
        be->outer_step(be, dg + 3, dm + 3, dd + 3, dw + 3, N - 3, 0.7f, 0.9f, mix[k]);
        for (size_t i = 3; i < N; i++) {
            wm[i] = 0.9f * wm[i] + d[i];
            wg[i] -= 0.7f * (d[i] + 0.9f * wm[i]);
            ww[i] = k == 0 ? wg[i] : 0.3f * ww[i] + (1.0f - 0.3f) * wg[i];
        }
    }
    download(be, got, dg, N);
    assert_same_bits(got, wg, N);
    download(be, got, dm, N);
    assert_same_bits(got, wm, N);
    download(be, got, dw, N);
    assert_same_bits(got, ww, N);
    be->free(be, dg), be->free(be, dm), be->free(be, dd), be->free(be, dw);
}

static void test_cpu_ops(void **state) {
    (void)state;
    vector_ops_follow_rules(bp_backend_cpu());
    adamw_follows_rule(bp_backend_cpu());
    outer_step_follows_rule(bp_backend_cpu());
}

static void test_check_ops(void **state) {
    (void)state;
    vector_ops_follow_rules(bp_backend_check());
    adamw_follows_rule(bp_backend_check());
    outer_step_follows_rule(bp_backend_check());
}

static void test_events(void **state) {
    (void)state;
    const bp_backend *bes[2] = {bp_backend_cpu(), bp_backend_check()};
    for (int k = 0; k < 2; k++) {
        const bp_backend *be = bes[k];
        bp_err err;
        bp_dev_stream *s;
        bp_dev_event *e;
        assert_int_equal(be->stream_create(be, &s, &err), BP_OK);
        assert_int_equal(be->event_create(be, &e, &err), BP_OK);
        assert_int_equal(be->event_record(be, e, NULL, &err), BP_OK);
        assert_int_equal(be->stream_wait(be, s, e, &err), BP_OK);
        assert_int_equal(be->event_sync(be, e, &err), BP_OK);
        be->event_destroy(be, e);
        be->stream_destroy(be, s);
    }
}

static void segv_exit(int sig) {
    (void)sig;
    _exit(42);
}

/* Runs fn in a child; returns 42 when it faulted, else its exit status or signal. */
static int in_child(void (*fn)(float *), float *arg) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* our handler, not a sanitizer's, so the status is the same in every build */
        struct sigaction sa = {.sa_handler = segv_exit};
        sigaction(SIGSEGV, &sa, NULL);
        sigaction(SIGBUS, &sa, NULL);
        fn(arg);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static volatile float sink; /* keeps the compiler from dropping the reads */
static void host_read(float *p) { sink = *p; }
static void host_write(float *p) { p[10] = 1.0f; }
static void host_memcpy(float *p) {
    float h[4];
    memcpy(h, p + 2, sizeof h);
    sink = h[3];
}
static void table_read(float *p) {
    float h[4];
    bp_backend_get(bp_backend_check(), h, p, 4);
}
static void host_pointer_to_table(float *p) {
    (void)p;
    float h[4] = {0};
    bp_backend_check()->scale(bp_backend_check(), h, 4, 2.0f);
}

static void test_check_faults_on_host_access(void **state) {
    (void)state;
    float one[16] = {1};
    float *d = upload(bp_backend_check(), one, 16);
    assert_int_equal(in_child(host_read, d), 42);
    assert_int_equal(in_child(host_write, d), 42);
    assert_int_equal(in_child(host_memcpy, d), 42);
    assert_int_equal(in_child(table_read, d), 0); /* through the table it works */
    /* host memory given to the table: the backend aborts with a line on stderr */
    assert_int_equal(in_child(host_pointer_to_table, d), 128 + SIGABRT);
    /* the cpu backend's memory is the host's */
    float *c = upload(bp_backend_cpu(), one, 16);
    assert_int_equal(in_child(host_read, c), 0);
    bp_backend_check()->free(bp_backend_check(), d);
    bp_backend_cpu()->free(bp_backend_cpu(), c);
}

/* Host memory from the table is the host's, whatever the backend: the checking
 * backend neither claims nor protects it (comm/ stages device buffers in it). */
static void test_host_memory(void **state) {
    (void)state;
    const bp_backend *bes[2] = {bp_backend_cpu(), bp_backend_check()};
    for (int k = 0; k < 2; k++) {
        const bp_backend *be = bes[k];
        float x[N], *h = NULL;
        bp_err err;
        random_fill(x, N, 5);
        assert_int_equal(be->host_alloc(be, (void **)&h, N * sizeof *h, "test", &err), BP_OK);
        memcpy(h, x, sizeof x);
        float *d = upload(be, h, N);
        memset(h, 0, sizeof x);
        download(be, h, d, N);
        assert_same_bits(h, x, N);
        assert_int_equal(in_child(host_write, h), 0);
        if (be == bp_backend_check()) assert_false(be->owns(be, h));
        be->host_free(be, h);
        be->free(be, d);
    }
}

static void test_by_name(void **state) {
    (void)state;
    bp_err err;
    assert_ptr_equal(bp_backend_by_name("cpu", "--device", &err), bp_backend_cpu());
    assert_ptr_equal(bp_backend_by_name("check", "--device", &err), bp_backend_check());
    assert_null(bp_backend_by_name("tpu", "--device", &err));
    assert_string_equal(err.msg, "--device: no backend called 'tpu' (cpu, check)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_ops),   cmocka_unit_test(test_check_ops),
        cmocka_unit_test(test_events),    cmocka_unit_test(test_check_faults_on_host_access),
        cmocka_unit_test(test_host_memory), cmocka_unit_test(test_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

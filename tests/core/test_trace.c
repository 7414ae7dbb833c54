/* core/trace.c: the ring keeps the newest events and counts the dropped ones, events
 * carry their thread's track and arguments, and the text parses as JSON (core/json.c)
 * with the names escaped. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/json.h"
#include "core/trace.h"

/* The trace's text as a JSON array. */
static void parse(bp_trace *t, const char *process, bp_json *j, char **doc) {
    char *text;
    size_t n;
    assert_int_equal(bp_trace_format(t, 3, process, &text, &n, NULL), BP_OK);
    assert_int_equal(strlen(text), n);
    *doc = malloc(n + 3);
    snprintf(*doc, n + 3, "[%s]", text);
    free(text);
    assert_int_equal(bp_json_parse(*doc, n + 2, j, NULL), BP_OK);
}

/* The i-th element of array node arr. */
static int nth(const bp_json *j, int arr, int i) {
    int e = j->nodes[arr].child;
    while (i-- > 0) e = j->nodes[e].next;
    return e;
}

static double num(const bp_json *j, int obj, const char *key) {
    int k = bp_json_get(j, obj, key);
    assert_true(k >= 0);
    return j->nodes[k].num;
}

static void test_ring_keeps_newest(void **state) {
    (void)state;
    bp_trace *t;
    assert_int_equal(bp_trace_create(4, &t, NULL), BP_OK);
    for (int i = 0; i < 6; i++) {
        bp_trace_set_step(t, i);
        bp_trace_micro(t, "forward", bp_now(), i, 0);
    }
    assert_int_equal(bp_trace_dropped(t), 2);
    bp_json j;
    char *doc;
    parse(t, "rank \"3\"", &j, &doc);
    /* process_name, process_sort_index, process_labels, thread_name, thread_sort_index */
    int name = nth(&j, 0, 0), labels = nth(&j, 0, 2);
    char buf[64];
    assert_true(bp_json_str_copy(&j, bp_json_get(&j, bp_json_get(&j, name, "args"), "name"), buf,
                                 sizeof buf));
    assert_string_equal(buf, "rank \"3\"");
    assert_true(bp_json_str_eq(&j, bp_json_get(&j, labels, "name"), "process_labels"));
    for (int i = 0; i < 4; i++) {
        int e = nth(&j, 0, 5 + i), args = bp_json_get(&j, e, "args");
        assert_true(bp_json_str_eq(&j, bp_json_get(&j, e, "ph"), "X"));
        assert_true(num(&j, e, "pid") == 3 && num(&j, e, "tid") == 0);
        assert_true(num(&j, args, "step") == 2 + i && num(&j, args, "micro") == 2 + i);
        assert_true(num(&j, e, "dur") >= 0);
    }
    assert_int_equal(nth(&j, 0, 9), -1);
    bp_json_free(&j);
    free(doc);
    bp_trace_destroy(t);
}

static void *worker(void *arg) {
    bp_trace *t = arg;
    bp_trace_thread(t, "dp communication");
    bp_trace_args a = BP_TRACE_NO_ARGS;
    a.bytes_sent = 4096, a.peer = 1, a.group = bp_trace_intern(t, "dp(p0,t0)");
    bp_trace_add(t, "comm", "allreduce", bp_now(), &a);
    return NULL;
}

static void test_threads_and_args(void **state) {
    (void)state;
    bp_trace *t;
    assert_int_equal(bp_trace_create(16, &t, NULL), BP_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, worker, t), 0);
    pthread_join(th, NULL);
    bp_trace_span(t, "step", "step", bp_now());
    bp_json j;
    char *doc;
    parse(t, "rank 3", &j, &doc);
    /* process_name, process_sort_index, then a name and a sort index per thread */
    int main_name = nth(&j, 0, 2), comm_name = nth(&j, 0, 4);
    assert_true(bp_json_str_eq(&j, bp_json_get(&j, bp_json_get(&j, main_name, "args"), "name"),
                               "main"));
    assert_true(num(&j, comm_name, "tid") == 1);
    assert_true(bp_json_str_eq(&j, bp_json_get(&j, bp_json_get(&j, comm_name, "args"), "name"),
                               "dp communication"));
    int comm = nth(&j, 0, 6), step = nth(&j, 0, 7), args = bp_json_get(&j, comm, "args");
    assert_true(num(&j, comm, "tid") == 1 && num(&j, step, "tid") == 0);
    assert_true(num(&j, args, "bytes_sent") == 4096 && num(&j, args, "peer") == 1);
    assert_true(bp_json_str_eq(&j, bp_json_get(&j, args, "axis"), "dp"));
    assert_int_equal(bp_json_get(&j, bp_json_get(&j, step, "args"), "micro"), -1);
    bp_json_free(&j);
    free(doc);
    bp_trace_destroy(t);
}

/* Threads recording at once (as the communication threads do beside the main
 * thread) while another formats: every event is kept or counted as dropped. */
enum { WRITERS = 4, EACH = 3000, RING = 1000 };

static void *writer(void *arg) {
    bp_trace *t = arg;
    for (int i = 0; i < EACH; i++) bp_trace_span(t, "compute", "work", bp_now());
    return NULL;
}

static void test_concurrent_appends(void **state) {
    (void)state;
    bp_trace *t;
    assert_int_equal(bp_trace_create(RING, &t, NULL), BP_OK);
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++) assert_int_equal(pthread_create(&th[i], NULL, writer, t), 0);
    char *text;
    size_t n;
    assert_int_equal(bp_trace_format(t, 0, "rank 0", &text, &n, NULL), BP_OK);
    free(text);
    for (int i = 0; i < WRITERS; i++) pthread_join(th[i], NULL);
    assert_int_equal(bp_trace_dropped(t), WRITERS * EACH - RING);
    bp_json j;
    char *doc;
    parse(t, "rank 0", &j, &doc);
    int x = 0;
    for (int e = j.nodes[0].child; e >= 0; e = j.nodes[e].next)
        x += bp_json_str_eq(&j, bp_json_get(&j, e, "ph"), "X");
    assert_int_equal(x, RING);
    bp_json_free(&j);
    free(doc);
    bp_trace_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring_keeps_newest),
        cmocka_unit_test(test_threads_and_args),
        cmocka_unit_test(test_concurrent_appends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

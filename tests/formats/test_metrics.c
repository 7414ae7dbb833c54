/* formats/metrics.c: every record is valid JSON whatever the numbers: a NaN or an
 * infinity (a skipped step, a run with no step to time) is written as null. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/file.h"
#include "core/json.h"
#include "formats/metrics.h"

static void test_non_finite_numbers_are_null(void **state) {
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/bp_metrics_%d.jsonl", (int)getpid());
    bp_metrics m;
    assert_int_equal(bp_metrics_open(&m, path, 0, NULL), BP_OK);
    bp_step_record r = {.step = 1, .loss = NAN, .lr = INFINITY, .grad_norm = -INFINITY};
    r.axis_bytes[0] = NAN;
    bp_metrics_step(&m, &r);
    bp_metrics_eval(&m, 1, NAN, INFINITY);
    bp_memory_record s = {.steps = 0, .median_step_ms = NAN};
    bp_metrics_summary(&m, &s);
    bp_metrics_close(&m);
    bp_bytes b;
    assert_int_equal(bp_read_file(path, &b, NULL), BP_OK);
    unlink(path);
    int records = 0;
    for (char *line = (char *)b.data, *end; line < (char *)b.data + b.n; line = end + 1) {
        end = memchr(line, '\n', (size_t)((char *)b.data + b.n - line));
        assert_non_null(end);
        bp_json j = {0};
        bp_err err;
        if (bp_json_parse(line, (size_t)(end - line), &j, &err) != BP_OK)
            fail_msg("invalid JSON: %.*s (%s)", (int)(end - line), line, err.msg);
        bp_json_free(&j);
        records++;
    }
    assert_int_equal(records, 3);
    assert_non_null(strstr((char *)b.data, "\"median_step_ms\":null"));
    assert_non_null(strstr((char *)b.data, "\"val_loss\":null"));
    free(b.data);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_non_finite_numbers_are_null)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

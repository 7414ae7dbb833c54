/* core/json.c: values, lookups, escapes, and rejection of malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/json.h"

static void test_parse_document(void **state) {
    (void)state;
    const char *s = " {\"a\": [1, 2.5, -3e2], \"b\\\"q\": \"x\\ny\", \"c\": {\"d\": true},"
                    " \"e\": null, \"f\": false} ";
    bp_json j;
    assert_int_equal(bp_json_parse(s, strlen(s), &j, NULL), BP_OK);
    int a = bp_json_get(&j, 0, "a");
    assert_int_equal(j.nodes[a].type, BP_JSON_ARRAY);
    int e0 = j.nodes[a].child, e1 = j.nodes[e0].next, e2 = j.nodes[e1].next;
    unsigned long long u;
    assert_true(bp_json_uint(&j, e0, &u) && u == 1);
    assert_false(bp_json_uint(&j, e1, &u)); /* 2.5 is not an integer */
    assert_true(j.nodes[e2].num == -300);
    assert_int_equal(j.nodes[e2].next, -1);
    char buf[16];
    assert_true(bp_json_str_copy(&j, bp_json_get(&j, 0, "b\"q"), buf, sizeof buf));
    assert_string_equal(buf, "x\ny");
    assert_false(bp_json_str_copy(&j, bp_json_get(&j, 0, "b\"q"), buf, 3)); /* too small */
    int c = bp_json_get(&j, 0, "c");
    assert_true(j.nodes[bp_json_get(&j, c, "d")].num == 1);
    assert_int_equal(j.nodes[bp_json_get(&j, 0, "e")].type, BP_JSON_NULL);
    assert_int_equal(bp_json_get(&j, 0, "missing"), -1);
    assert_int_equal(bp_json_get(&j, a, "x"), -1); /* not an object */
    bp_json_free(&j);
}

static void test_rejects_malformed(void **state) {
    (void)state;
    const char *bad[] = {"",          "{",          "{\"a\":}",  "[1,]",     "{\"a\" 1}",
                         "\"abc",     "[1] x",      "tru",       "{\"a\":1,}", "\"\\x\"",
                         "[1e999]",   "\"a\tb\"",   "{1:2}",     "[--1]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bp_json j;
        bp_err err;
        if (bp_json_parse(bad[i], strlen(bad[i]), &j, &err) != BP_EFORMAT)
            fail_msg("accepted malformed JSON '%s'", bad[i]);
        assert_non_null(strstr(err.msg, "JSON"));
    }
}

static void test_depth_is_bounded(void **state) {
    (void)state;
    char deep[200];
    memset(deep, '[', sizeof deep);
    bp_json j;
    bp_err err;
    assert_int_equal(bp_json_parse(deep, sizeof deep, &j, &err), BP_EFORMAT);
    assert_non_null(strstr(err.msg, "too deep"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_document),
        cmocka_unit_test(test_rejects_malformed),
        cmocka_unit_test(test_depth_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

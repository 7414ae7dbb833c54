/* core/options.c: parsing into a struct, range and type errors that name the
 * option, flags, choices, and help that shows every default. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/options.h"

typedef struct cfg {
    int n;
    int64_t big;
    double x;
    char name[8];
    int mode;
    bool flag;
} cfg;

static const bp_option opts[] = {
    {"n", BP_OPT_INT, offsetof(cfg, n), 0, NULL, 1, 100, "N", "a count", NULL},
    {"big", BP_OPT_INT64, offsetof(cfg, big), 0, NULL, 0, 1e15, "N", "a big count", NULL},
    {"x", BP_OPT_DOUBLE, offsetof(cfg, x), 0, NULL, -1, 1, "X", "a ratio", NULL},
    {"name", BP_OPT_STRING, offsetof(cfg, name), 8, NULL, 0, 0, "S", "a name", NULL},
    {"mode", BP_OPT_CHOICE, offsetof(cfg, mode), 0, "fast|slow|off", 0, 0, NULL, "a mode", NULL},
    {"flag", BP_OPT_FLAG, offsetof(cfg, flag), 0, NULL, 0, 0, NULL, "a flag", NULL},
};
#define N_OPTS ((int)(sizeof opts / sizeof opts[0]))

static int parse(cfg *c, bp_err *err, int argc, ...) {
    char *argv[16];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc; i++) argv[i] = va_arg(ap, char *);
    va_end(ap);
    memset(c, 0, sizeof *c);
    return bp_options_parse(opts, N_OPTS, c, argc, argv, NULL, err);
}

static void test_parse_all_types(void **state) {
    (void)state;
    cfg c;
    assert_int_equal(parse(&c, NULL, 9, "--n", "7", "--big=123456789012", "--x", "-0.5",
                           "--name=abc", "--mode", "slow", "--flag"),
                     BP_OK);
    assert_int_equal(c.n, 7);
    assert_true(c.big == 123456789012LL);
    assert_true(c.x == -0.5);
    assert_string_equal(c.name, "abc");
    assert_int_equal(c.mode, 1);
    assert_true(c.flag);
}

static void expect(int rc, const bp_err *err, const char *needle) {
    assert_int_equal(rc, BP_EUSAGE);
    if (!strstr(err->msg, needle)) fail_msg("message '%s' lacks '%s'", err->msg, needle);
}

static void test_errors_name_the_option(void **state) {
    (void)state;
    cfg c;
    bp_err e;
    expect(parse(&c, &e, 2, "--n", "0"), &e, "--n: 0 is out of range");
    expect(parse(&c, &e, 2, "--n", "3x"), &e, "--n: '3x' is not an integer");
    expect(parse(&c, &e, 2, "--x", "nan"), &e, "--x: 'nan' is not a number");
    expect(parse(&c, &e, 2, "--x", "2"), &e, "--x: 2 is out of range");
    expect(parse(&c, &e, 1, "--n"), &e, "--n needs a value");
    expect(parse(&c, &e, 2, "--mode", "medium"), &e, "'medium' is not one of fast|slow|off");
    expect(parse(&c, &e, 1, "--flag=1"), &e, "--flag takes no value");
    expect(parse(&c, &e, 2, "--name", "toolongname"), &e, "--name: value is longer");
    expect(parse(&c, &e, 1, "--nope"), &e, "unknown option '--nope'");
    expect(parse(&c, &e, 1, "stray"), &e, "unexpected argument 'stray'");
    expect(parse(&c, &e, 2, "--big", "99999999999999999999"), &e, "--big");
}

static void test_help_lists_every_option_with_default(void **state) {
    (void)state;
    cfg d = {.n = 5, .big = 9, .x = 0.25, .name = "zz", .mode = 2};
    char buf[4096] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    bp_options_print_help(f, opts, N_OPTS, &d);
    fclose(f);
    const char *want[] = {"--n N", "(default: 5)", "--big N", "(default: 9)", "(default: 0.25)",
                          "(default: zz)", "--mode fast|slow|off", "(default: off)", "--flag"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(buf, want[i])) fail_msg("help lacks '%s':\n%s", want[i], buf);
    int help = 0;
    char *argv[] = {"--n", "3", "--help"};
    cfg c = {0};
    assert_int_equal(bp_options_parse(opts, N_OPTS, &c, 3, argv, &help, NULL), BP_OK);
    assert_int_equal(help, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_all_types),
        cmocka_unit_test(test_errors_name_the_option),
        cmocka_unit_test(test_help_lists_every_option_with_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

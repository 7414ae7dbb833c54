/* core/file.c: atomic writes leave no temporary file and replace the old content
 * whole; reads report the path; mkdir -p and path joins. */
#include <dirent.h>
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

static void test_atomic_write_and_read(void **state) {
    (void)state;
    char dir[64], path[128];
    snprintf(dir, sizeof dir, "/tmp/bp_file_%d/a/b", (int)getpid());
    assert_int_equal(bp_mkdir_p(dir, NULL), BP_OK);
    assert_int_equal(bp_mkdir_p(dir, NULL), BP_OK); /* existing is fine */
    assert_int_equal(bp_path_join(path, sizeof path, dir, "x.bin", NULL), BP_OK);
    bp_iovec parts[] = {{"hello ", 6}, {"world", 5}};
    assert_int_equal(bp_write_parts_atomic(path, parts, 2, NULL), BP_OK);
    assert_int_equal(bp_write_file_atomic(path, "new", 3, NULL), BP_OK);
    bp_bytes b;
    assert_int_equal(bp_read_file(path, &b, NULL), BP_OK);
    assert_int_equal(b.n, 3);
    assert_memory_equal(b.data, "new", 3);
    free(b.data);
    /* Only x.bin is left in the directory: no temporary file. */
    DIR *d = opendir(dir);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));) entries += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(entries, 1);
    unlink(path);
}

static void test_errors_name_the_path(void **state) {
    (void)state;
    bp_err err;
    bp_bytes b;
    assert_int_equal(bp_read_file("/nonexistent/f", &b, &err), BP_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/f"));
    assert_int_equal(bp_write_file_atomic("/nonexistent/dir/f", "x", 1, &err), BP_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/dir/f"));
    char small[8];
    assert_int_equal(bp_path_join(small, sizeof small, "abcd", "efgh", &err), BP_EUSAGE);
    assert_int_equal(bp_mkdir_p("/proc/version/x", &err), BP_EIO);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomic_write_and_read),
        cmocka_unit_test(test_errors_name_the_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* data/idx.c: IDX files with full header validation, gzip'ed or plain, each kind
 * of damage reported with the file's name, and the real Fashion-MNIST test set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "data/idx.h"

static char img_path[64], lbl_path[64];

static size_t put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return 4;
}

static void write_bytes(const char *path, const uint8_t *b, size_t n, int gz) {
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, b, (unsigned)n), (int)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(b, 1, n, f), n);
        fclose(f);
    }
}

/* n images of 2x3 pixels (pixel value = index) and n labels (i % 10), then
 * `extra` additional payload bytes (negative: that many bytes cut off). */
static void make_files(uint32_t img_magic, int n_img, int n_lbl, int extra, int gz) {
    uint8_t b[4096];
    size_t k = put_be32(b, img_magic);
    k += put_be32(b + k, (uint32_t)n_img);
    k += put_be32(b + k, 2);
    k += put_be32(b + k, 3);
    for (int i = 0; i < n_img * 6 + (extra > 0 ? extra : 0); i++) b[k++] = (uint8_t)i;
    write_bytes(img_path, b, k - (size_t)(extra < 0 ? -extra : 0), gz);
    k = put_be32(b, 0x801);
    k += put_be32(b + k, (uint32_t)n_lbl);
    for (int i = 0; i < n_lbl; i++) b[k++] = (uint8_t)(i % 10);
    write_bytes(lbl_path, b, k, gz);
}

static int setup(void **state) {
    (void)state;
    snprintf(img_path, sizeof img_path, "/tmp/bp_idx_img_%d", (int)getpid());
    snprintf(lbl_path, sizeof lbl_path, "/tmp/bp_idx_lbl_%d", (int)getpid());
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(img_path);
    unlink(lbl_path);
    return 0;
}

static void test_valid_gz_and_plain(void **state) {
    (void)state;
    for (int gz = 0; gz < 2; gz++) {
        make_files(0x803, 5, 5, 0, gz);
        bp_images im;
        assert_int_equal(bp_idx_load(img_path, lbl_path, 10, &im, NULL), BP_OK);
        assert_int_equal(im.n, 5);
        assert_int_equal(im.rows, 2);
        assert_int_equal(im.cols, 3);
        for (int i = 0; i < 30; i++) assert_int_equal(im.pixels[i], i);
        for (int i = 0; i < 5; i++) assert_int_equal(im.labels[i], i);
        bp_images_free(&im);
    }
}

static void expect_error(int rc_expected, const char *needle) {
    bp_images im;
    bp_err err;
    int rc = bp_idx_load(img_path, lbl_path, 10, &im, &err);
    assert_int_equal(rc, rc_expected);
    if (!strstr(err.msg, needle)) fail_msg("message '%s' lacks '%s'", err.msg, needle);
}

static void test_damage_is_named(void **state) {
    (void)state;
    make_files(0x802, 5, 5, 0, 1);
    expect_error(BP_EFORMAT, "wrong IDX magic");
    make_files(0x803, 5, 5, -1, 1);
    expect_error(BP_EFORMAT, "truncated");
    make_files(0x803, 5, 5, 3, 1);
    expect_error(BP_EFORMAT, "trailing bytes");
    make_files(0x803, 5, 4, 0, 0);
    expect_error(BP_EFORMAT, "4 labels for 5 images");
    make_files(0x803, 0, 0, 0, 0);
    expect_error(BP_EFORMAT, "implausible");
    write_bytes(img_path, (const uint8_t *)"\0\0\x08", 3, 1);
    expect_error(BP_EFORMAT, "truncated IDX header");
    unlink(img_path);
    expect_error(BP_EIO, img_path);
}

/* A header promising more than the reader takes (a gzip bomb: a few MB that inflate
 * to gigabytes of zeros) is refused before any data is read. */
static void test_header_beyond_the_limit(void **state) {
    (void)state;
    uint8_t b[64];
    size_t k = put_be32(b, 0x803);
    k += put_be32(b + k, 400000000u); /* 2.4 GB of 2x3 images */
    k += put_be32(b + k, 2);
    k += put_be32(b + k, 3);
    write_bytes(img_path, b, k, 1);
    expect_error(BP_EFORMAT, "more than the 1073741824 bytes this reader accepts");
}

static void test_label_out_of_range(void **state) {
    (void)state;
    make_files(0x803, 12, 12, 0, 0); /* labels 0..9, 0, 1 */
    bp_images im;
    bp_err err;
    assert_int_equal(bp_idx_load(img_path, lbl_path, 5, &im, &err), BP_EFORMAT);
    assert_non_null(strstr(err.msg, "label 5"));
}

static void test_damaged_gzip_stream(void **state) {
    (void)state;
    make_files(0x803, 50, 50, 0, 1);
    FILE *f = fopen(img_path, "r+b");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, n - 6, SEEK_SET); /* inside the CRC trailer */
    fputc(0x5a, f);
    fputc(0xa5, f);
    fclose(f);
    expect_error(BP_EFORMAT, img_path);
}

static void test_real_fashion_mnist(void **state) {
    (void)state;
    bp_images im;
    bp_err err;
    int rc = bp_fashion_load("/usr/share/datasets/fashion-mnist", 0, &im, &err);
    if (rc) fail_msg("%s", err.msg);
    assert_int_equal(im.n, 10000);
    assert_int_equal(im.rows * im.cols, 784);
    int counts[10] = {0};
    for (int i = 0; i < im.n; i++) counts[im.labels[i]]++;
    for (int k = 0; k < 10; k++) assert_int_equal(counts[k], 1000); /* balanced test set */
    bp_images_free(&im);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_gz_and_plain),  cmocka_unit_test(test_damage_is_named),
        cmocka_unit_test(test_header_beyond_the_limit),
        cmocka_unit_test(test_label_out_of_range),  cmocka_unit_test(test_damaged_gzip_stream),
        cmocka_unit_test(test_real_fashion_mnist),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

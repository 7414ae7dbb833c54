/* data/text.c and data/sampler.c: the 90/10 split, training windows and their
 * sharding by rank, fixed validation windows, errors for empty and short files,
 * and the epoch sampler's permutations and resumable state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "data/sampler.h"
#include "data/text.h"

static char path[64];

static void write_file(const char *data, size_t n) {
    snprintf(path, sizeof path, "/tmp/bp_test_text_%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void test_split_and_windows(void **state) {
    (void)state;
    char data[1000];
    for (int i = 0; i < 1000; i++) data[i] = (char)(i * 7 % 251); /* any bytes, not only text */
    write_file(data, sizeof data);
    bp_text t;
    assert_int_equal(bp_text_load(path, "/nonexistent", &t, NULL), BP_OK);
    assert_int_equal(t.n, 1000);
    assert_int_equal(t.n_train, 900);
    enum { B = 8, T = 16 };
    int32_t tok[B * T], tgt[B * T];
    bp_rng r;
    bp_rng_seed(&r, 5, 0);
    for (int rep = 0; rep < 50; rep++) {
        bp_text_train_batch(&t, &r, B, T, 0, 1, tok, tgt);
        for (int b = 0; b < B; b++) {
            /* Each row is a contiguous window inside the train split, targets shifted by one. */
            for (int j = 0; j + 1 < T; j++) assert_int_equal(tgt[b * T + j], tok[b * T + j + 1]);
            int found = 0;
            for (size_t s = 0; s + T < t.n_train && !found; s++) {
                int ok = 1;
                for (int j = 0; j < T && ok; j++)
                    ok = t.bytes[s + j] == tok[b * T + j] && t.bytes[s + j + 1] == tgt[b * T + j];
                found = ok;
            }
            assert_true(found);
        }
    }
    bp_text_free(&t);
    unlink(path);
}

static void test_shards_union_is_global_batch(void **state) {
    (void)state;
    char data[5000];
    for (int i = 0; i < 5000; i++) data[i] = (char)(i % 13 + i / 13);
    write_file(data, sizeof data);
    bp_text t;
    assert_int_equal(bp_text_load(path, "/nonexistent", &t, NULL), BP_OK);
    enum { B = 12, T = 8 };
    int32_t g_tok[B * T], g_tgt[B * T], tok[B * T], tgt[B * T];
    for (int world = 1; world <= 4; world++) {
        if (B % world) continue;
        for (int rank = 0; rank < world; rank++) {
            bp_rng a, b;
            bp_rng_seed(&a, 9, 1);
            bp_rng_seed(&b, 9, 1);
            bp_text_train_batch(&t, &a, B, T, 0, 1, g_tok, g_tgt);
            bp_text_train_batch(&t, &b, B, T, rank, world, tok, tgt);
            int rows = B / world;
            assert_memory_equal(tok, g_tok + rank * rows * T, sizeof(int32_t) * rows * T);
            assert_memory_equal(tgt, g_tgt + rank * rows * T, sizeof(int32_t) * rows * T);
            /* every rank's generator advanced alike */
            assert_memory_equal(&a, &b, sizeof a);
        }
    }
    bp_text_free(&t);
    unlink(path);
}

static void test_val_windows_fixed_and_in_split(void **state) {
    (void)state;
    char data[3000];
    for (int i = 0; i < 3000; i++) data[i] = (char)i;
    write_file(data, sizeof data);
    bp_text t;
    assert_int_equal(bp_text_load(path, "/nonexistent", &t, NULL), BP_OK);
    enum { T = 10, N = 7 };
    int32_t tok[T], tgt[T];
    bp_text_val_window(&t, 0, N, T, tok, tgt);
    assert_int_equal(tok[0], (uint8_t)data[t.n_train]);
    bp_text_val_window(&t, N - 1, N, T, tok, tgt);
    assert_int_equal(tgt[T - 1], (uint8_t)data[t.n - 1]); /* the last window ends at the end */
    bp_text_free(&t);
    unlink(path);
}

static void test_empty_and_short_files(void **state) {
    (void)state;
    write_file("", 0);
    bp_text t;
    bp_err err;
    assert_int_equal(bp_text_load(path, "/nonexistent", &t, &err), BP_EFORMAT);
    assert_non_null(strstr(err.msg, "empty"));
    write_file("abcdefghijklmnopqrst", 20);
    assert_int_equal(bp_text_load(path, "/nonexistent", &t, NULL), BP_OK);
    assert_int_equal(bp_text_check_seq_len(&t, path, 1, NULL), BP_OK);
    assert_int_equal(bp_text_check_seq_len(&t, path, 2, &err), BP_EFORMAT);
    assert_non_null(strstr(err.msg, "--seq-len 2"));
    bp_text_free(&t);
    assert_int_equal(bp_text_load("/nonexistent/file", "/tmp", &t, &err), BP_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/file"));
    unlink(path);
}

static void test_epoch_sampler(void **state) {
    (void)state;
    enum { N = 103, B = 10 };
    bp_epoch_sampler s, t;
    assert_int_equal(bp_epoch_sampler_init(&s, N, 42, NULL), BP_OK);
    int seen[N] = {0}, idx[B];
    for (int step = 0; step < N / B; step++) {
        bp_epoch_sampler_next(&s, B, 0, 1, idx);
        for (int i = 0; i < B; i++) seen[idx[i]]++;
    }
    for (int i = 0; i < N; i++) assert_true(seen[i] <= 1); /* no repeats within an epoch */
    bp_epoch_sampler_next(&s, B, 0, 1, idx); /* 3 items left: next epoch */
    assert_int_equal(s.epoch, 1);
    assert_int_equal(s.pos, B);
    /* A sampler restored from (epoch, pos) continues identically. */
    assert_int_equal(bp_epoch_sampler_init(&t, N, 42, NULL), BP_OK);
    bp_epoch_sampler_seek(&t, s.epoch, s.pos);
    int a[B], b[B], half[B / 2];
    bp_epoch_sampler_next(&s, B, 0, 1, a);
    bp_epoch_sampler_next(&t, B, 1, 2, half); /* rank 1 of 2 takes the second half */
    memcpy(b + B / 2, half, sizeof half);
    assert_memory_equal(a + B / 2, b + B / 2, sizeof half);
    bp_epoch_sampler_free(&s);
    bp_epoch_sampler_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_and_windows),
        cmocka_unit_test(test_shards_union_is_global_batch),
        cmocka_unit_test(test_val_windows_fixed_and_in_split),
        cmocka_unit_test(test_empty_and_short_files),
        cmocka_unit_test(test_epoch_sampler),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

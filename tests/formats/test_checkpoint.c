/* formats/safetensors.c and formats/checkpoint.c: weights and state round-trip
 * exactly, a flipped byte anywhere in a checkpoint is detected on load, and a
 * checkpoint of another configuration, or of a model kind this build does not know, is
 * refused with a message naming it. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/file.h"
#include "formats/checkpoint.h"
#include "train/config.h"

static char out_dir[64];

static bp_model_config tiny(int hidden) {
    return (bp_model_config){
        .kind = BP_MODEL_MLP, .in_dim = 5, .hidden = hidden, .n_hidden = 1, .n_class = 3};
}

static void make(const bp_model_config *c, bp_model **m, bp_optim *o) {
    assert_int_equal(bp_model_create(c, 0, -1, m, NULL), BP_OK);
    bp_model_init_weights(*m, 77);
    bp_optim_config oc = {.kind = BP_OPTIM_ADAMW, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    assert_int_equal(bp_optim_init(o, &oc, bp_model_num_params(*m), NULL), BP_OK);
    for (size_t i = 0; i < o->n; i++) {
        o->m[i] = (float)i * 0.5f;
        o->v[i] = (float)i * 0.25f;
    }
    o->t = 3;
}

/* Only this process's folder: another run of this test may be using its own. */
static void remove_out_dir(void) {
    char cmd[sizeof out_dir + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out_dir);
    assert_int_equal(system(cmd), 0);
}

static int setup(void **state) {
    (void)state;
    snprintf(out_dir, sizeof out_dir, "/tmp/bp_ckpt_%d", (int)getpid());
    return 0;
}

/* A checkpoint as the trainer writes one: shard, manifest, then `latest`. */
static void save(bp_model *m, bp_optim *o, int64_t step, int keep) {
    bp_resume_state rs = {.step = step, .epoch = 2, .pos = 17};
    bp_rng_seed(&rs.data_rng, 5, 6);
    bp_manifest mf = {.step = step, .dp = 2, .pp = 1, .tp = 1, .dp_algo = "allreduce",
                      .replicas = "identical"};
    char dir[256];
    bp_err err;
    int rc = bp_checkpoint_dir(out_dir, step, dir, sizeof dir, &err);
    if (rc == BP_OK) rc = bp_checkpoint_write_shard(dir, 0, 0, m, bp_model_params(m), o, &rs, &err);
    if (rc == BP_OK) rc = bp_manifest_write(dir, &mf, &err);
    if (rc == BP_OK) rc = bp_checkpoint_commit(out_dir, step, keep, &err);
    if (rc) fail_msg("%s", err.msg);
}

static void test_round_trip(void **state) {
    (void)state;
    bp_model_config c = tiny(4);
    bp_model *m, *m2;
    bp_optim o, o2;
    make(&c, &m, &o);
    save(m, &o, 10, 5);
    save(m, &o, 20, 5);
    bp_checkpoint ck;
    bp_err err;
    if (bp_checkpoint_open(out_dir, 0, 0, &ck, &err)) fail_msg("%s", err.msg);
    assert_non_null(strstr(ck.dir, "ckpt-00000020")); /* `latest` is followed */
    assert_int_equal(ck.rs.step, 20);
    assert_int_equal(ck.rs.epoch, 2);
    assert_int_equal(ck.rs.pos, 17);
    assert_int_equal(ck.manifest.step, 20);
    assert_int_equal(ck.manifest.dp, 2);
    assert_string_equal(ck.manifest.replicas, "identical");
    bp_model_config saved;
    assert_int_equal(bp_checkpoint_model_config(&ck, &saved, NULL), BP_OK);
    assert_int_equal(bp_train_config_match(&c, &saved, ck.dir, NULL), BP_OK);
    make(&c, &m2, &o2);
    memset(bp_model_params(m2), 0, bp_model_num_params(m2) * sizeof(float));
    memset(o2.m, 0, o2.n * sizeof(float));
    o2.t = 0;
    assert_int_equal(bp_checkpoint_load_model(&ck, m2, NULL), BP_OK);
    assert_int_equal(bp_checkpoint_load_optim(&ck, &o2, NULL), BP_OK);
    assert_memory_equal(bp_model_params(m), bp_model_params(m2),
                        bp_model_num_params(m) * sizeof(float));
    assert_memory_equal(o.m, o2.m, o.n * sizeof(float));
    assert_memory_equal(o.v, o2.v, o.n * sizeof(float));
    assert_int_equal(o2.t, 3);
    bp_checkpoint_close(&ck);
    bp_model_destroy(m);
    bp_model_destroy(m2);
    bp_optim_free(&o);
    bp_optim_free(&o2);
}

static void flip_every_byte(const char *file) {
    char dir[128], path[256];
    snprintf(dir, sizeof dir, "%s/ckpt-00000020", out_dir);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    bp_bytes b;
    assert_int_equal(bp_read_file(path, &b, NULL), BP_OK);
    for (size_t i = 0; i < b.n; i++) {
        b.data[i] ^= 0xff;
        assert_int_equal(bp_write_file_atomic(path, b.data, b.n, NULL), BP_OK);
        bp_checkpoint ck;
        bp_err err;
        int rc = bp_checkpoint_open(dir, 0, 0, &ck, &err);
        if (rc == BP_OK) fail_msg("flipped byte %zu of %s was not detected", i, file);
        assert_non_null(strstr(err.msg, dir)); /* the message names the checkpoint */
        b.data[i] ^= 0xff;
    }
    assert_int_equal(bp_write_file_atomic(path, b.data, b.n, NULL), BP_OK);
    free(b.data);
}

static void test_any_flipped_byte_is_detected(void **state) {
    (void)state;
    flip_every_byte("stage0-tp0.safetensors");
    flip_every_byte("stage0-tp0.state");
    flip_every_byte("manifest.json");
    bp_checkpoint ck;
    assert_int_equal(bp_checkpoint_open(out_dir, 0, 0, &ck, NULL), BP_OK); /* restored intact */
    bp_checkpoint_close(&ck);
}

static void test_other_configuration_is_refused(void **state) {
    (void)state;
    bp_model_config c = tiny(6);
    bp_model *m;
    bp_optim o;
    make(&c, &m, &o);
    bp_checkpoint ck;
    bp_err err;
    assert_int_equal(bp_checkpoint_open(out_dir, 0, 0, &ck, NULL), BP_OK);
    bp_model_config saved;
    assert_int_equal(bp_checkpoint_model_config(&ck, &saved, NULL), BP_OK);
    assert_int_equal(bp_train_config_match(&c, &saved, ck.dir, &err), BP_EUSAGE);
    assert_non_null(strstr(err.msg, "--hidden 4 but this run has --hidden 6"));
    assert_int_equal(bp_checkpoint_load_model(&ck, m, &err), BP_EFORMAT);
    assert_non_null(strstr(err.msg, "fc1.weight"));
    assert_int_equal(bp_checkpoint_load_optim(&ck, &o, &err), BP_EUSAGE);
    bp_checkpoint_close(&ck);
    bp_model_destroy(m);
    bp_optim_free(&o);
}

/* Overwrite the first `from` in the n bytes at p with `to`, of the same length. */
static void patch(uint8_t *p, size_t n, const char *from, const char *to) {
    size_t len = strlen(from);
    for (size_t i = 0; i + len <= n; i++)
        if (memcmp(p + i, from, len) == 0) {
            memcpy(p + i, to, len);
            return;
        }
    fail_msg("no %s in the file", from);
}

/* A name in the metadata that no model kind has (a checkpoint of a newer build, or a
 * damaged one whose checksums were rewritten) is refused, not read as another kind. */
static void test_unknown_model_name_is_refused(void **state) {
    (void)state;
    bp_checkpoint ck;
    bp_err err;
    assert_int_equal(bp_checkpoint_open(out_dir, 0, 0, &ck, NULL), BP_OK);
    /* The metadata's strings point into the file's bytes, parsed and checked already. */
    patch(ck.weights.file.data, ck.weights.file.n, "\"bagpipe.model\":\"mlp\"",
          "\"bagpipe.model\":\"rnn\"");
    bp_model_config saved;
    assert_int_equal(bp_checkpoint_model_config(&ck, &saved, &err), BP_EFORMAT);
    char file[4200];
    snprintf(file, sizeof file, "%s/stage0-tp0.safetensors", ck.dir);
    assert_non_null(strstr(err.msg, file));
    assert_non_null(strstr(err.msg, "unknown model 'rnn' (known: gpt|mlp)"));
    assert_null(strchr(err.msg, '\n'));
    bp_checkpoint_close(&ck);
}

static void test_keep_prunes_old_checkpoints(void **state) {
    (void)state;
    bp_model_config c = tiny(4);
    bp_model *m;
    bp_optim o;
    make(&c, &m, &o);
    save(m, &o, 30, 2);
    char path[128];
    snprintf(path, sizeof path, "%s/ckpt-00000010", out_dir);
    assert_false(bp_path_exists(path)); /* removed whole, files and directory */
    snprintf(path, sizeof path, "%s/ckpt-00000020", out_dir);
    assert_true(bp_path_exists(path));
    bp_model_destroy(m);
    bp_optim_free(&o);
    remove_out_dir();
}

/* A checkpoint at step 20 whose state file, with correct checksums, carries the
 * crafted field; opening it fails with a message naming the file and the field. */
static void refused_field(bp_resume_state rs, int64_t optim_t, const char *field) {
    bp_model_config c = tiny(4);
    bp_model *m;
    bp_optim o;
    make(&c, &m, &o);
    o.t = optim_t;
    char dir[256];
    bp_err err;
    bp_manifest mf = {.step = 20, .dp = 1, .pp = 1, .tp = 1, .dp_algo = "allreduce",
                      .replicas = "identical"};
    assert_int_equal(bp_checkpoint_dir(out_dir, 20, dir, sizeof dir, NULL), BP_OK);
    assert_int_equal(bp_checkpoint_write_shard(dir, 0, 0, m, bp_model_params(m), &o, &rs, NULL),
                     BP_OK);
    assert_int_equal(bp_manifest_write(dir, &mf, NULL), BP_OK);
    bp_checkpoint ck;
    if (bp_checkpoint_open(dir, 0, 0, &ck, &err) == BP_OK) {
        bp_checkpoint_close(&ck);
        fail_msg("a state file with a bad %s was accepted", field);
    }
    if (!strstr(err.msg, "stage0-tp0.state") || !strstr(err.msg, field))
        fail_msg("'%s' does not name the file and field %s", err.msg, field);
    bp_model_destroy(m);
    bp_optim_free(&o);
}

/* Every number read from a state file is range-checked: a crafted one with correct
 * checksums must not reach the sampler, the step counters or the optimizer. */
static void test_crafted_state_fields_are_refused(void **state) {
    (void)state;
    bp_resume_state ok = {.step = 20, .epoch = 1, .pos = 3};
    bp_resume_state r = ok;
    r.step = -5;
    refused_field(r, 3, "step");
    r = ok;
    r.step = 21; /* not the manifest's step */
    refused_field(r, 3, "step");
    const int64_t bad_pos[] = {-100000, -64, (int64_t)1 << 31};
    for (int i = 0; i < 3; i++) {
        r = ok;
        r.pos = bad_pos[i];
        refused_field(r, 3, "pos");
    }
    r = ok;
    r.epoch = -1;
    refused_field(r, 3, "epoch");
    r = ok;
    r.epoch = INT64_MAX;
    refused_field(r, 3, "epoch");
    refused_field(ok, INT64_MAX, "optimizer step");
    refused_field(ok, -1, "optimizer step");
    remove_out_dir();
}

static void touch(const char *dir, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a checkpoint\n", f);
    fclose(f);
}

static bool exists_in(const char *dir, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* Pruning removes only directories it wrote: a symlink is never followed, a name
 * that is not exactly ckpt-<8 digits> (a user's copy) is left, and a directory
 * without our manifest or with files of someone else is left. */
static void test_prune_leaves_what_is_not_ours(void **state) {
    (void)state;
    char elsewhere[96], dir[128];
    snprintf(elsewhere, sizeof elsewhere, "%s_elsewhere", out_dir);
    assert_int_equal(bp_mkdir_p(out_dir, NULL), BP_OK);
    assert_int_equal(bp_mkdir_p(elsewhere, NULL), BP_OK);
    touch(elsewhere, "manifest.json");
    touch(elsewhere, "stage0-tp0.state");
    snprintf(dir, sizeof dir, "%s/ckpt-00000001", out_dir);
    assert_int_equal(symlink(elsewhere, dir), 0);
    snprintf(dir, sizeof dir, "%s/ckpt-00000002", out_dir); /* a user's folder */
    assert_int_equal(bp_mkdir_p(dir, NULL), BP_OK);
    touch(dir, "notes.txt");
    bp_model_config c = tiny(4);
    bp_model *m;
    bp_optim o;
    make(&c, &m, &o);
    save(m, &o, 5, 100);
    save(m, &o, 8, 100);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp -r %s/ckpt-00000005 %s/ckpt-00000005-best", out_dir, out_dir);
    assert_int_equal(system(cmd), 0);
    snprintf(dir, sizeof dir, "%s/ckpt-00000008", out_dir); /* ours, with a user's file added */
    touch(dir, "notes.txt");
    save(m, &o, 10, 100);
    save(m, &o, 20, 2);
    assert_true(exists_in(elsewhere, "manifest.json"));
    assert_true(exists_in(elsewhere, "stage0-tp0.state"));
    assert_true(exists_in(out_dir, "ckpt-00000001"));
    assert_true(exists_in(out_dir, "ckpt-00000002/notes.txt"));
    assert_true(exists_in(out_dir, "ckpt-00000005-best/manifest.json"));
    assert_true(exists_in(out_dir, "ckpt-00000005-best/stage0-tp0.state"));
    assert_false(exists_in(out_dir, "ckpt-00000005"));
    assert_true(exists_in(out_dir, "ckpt-00000008/notes.txt"));
    assert_true(exists_in(out_dir, "ckpt-00000008/manifest.json"));
    assert_true(exists_in(out_dir, "ckpt-00000010/manifest.json"));
    assert_true(exists_in(out_dir, "ckpt-00000020/manifest.json"));
    bp_model_destroy(m);
    bp_optim_free(&o);
    remove_out_dir();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", elsewhere);
    assert_int_equal(system(cmd), 0);
}

static void test_safetensors_rejects_bad_headers(void **state) {
    (void)state;
    const char *headers[] = {
        "{\"w\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}",
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}",
        ("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"v\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"), /* overlap */
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}",
        "[1]",
    };
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        size_t hn = strlen(headers[i]);
        bp_bytes f = {malloc(8 + hn + 4), 8 + hn + 4};
        for (int k = 0; k < 8; k++) f.data[k] = (uint8_t)((uint64_t)hn >> (8 * k));
        memcpy(f.data + 8, headers[i], hn);
        memset(f.data + 8 + hn, 0, 4);
        bp_safetensors st;
        if (bp_safetensors_parse(f, &st, NULL) != BP_EFORMAT) fail_msg("accepted %s", headers[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_any_flipped_byte_is_detected),
        cmocka_unit_test(test_other_configuration_is_refused),
        cmocka_unit_test(test_unknown_model_name_is_refused),
        cmocka_unit_test(test_keep_prunes_old_checkpoints),
        cmocka_unit_test(test_prune_leaves_what_is_not_ours),
        cmocka_unit_test(test_crafted_state_fields_are_refused),
        cmocka_unit_test(test_safetensors_rejects_bad_headers),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

/* The checkpoint manifest and the output directory's `latest` pointer.
 *
 * manifest.json protects itself: its last member is "crc32", the CRC-32 of the
 * whole file as written with that member's value set to eight zeros. */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/file.h"
#include "core/json.h"
#include "formats/checkpoint.h"

#define CKPT_PREFIX "ckpt-"
#define MANIFEST "manifest.json"
#define CRC_KEY "\"crc32\":\""

bp_status bp_checkpoint_dir(const char *out_dir, int64_t step, char *buf, size_t n, bp_err *err) {
    char name[64];
    snprintf(name, sizeof name, CKPT_PREFIX "%08" PRId64, step);
    return bp_path_join(buf, n, out_dir, name, err);
}

/* The CRC of text with the 8 hex digits after CRC_KEY taken as zeros. */
static uint32_t manifest_crc(const char *text, size_t n, const char *digits) {
    uLong c = crc32_z(0, (const Bytef *)text, (size_t)(digits - text));
    c = crc32_z(c, (const Bytef *)"00000000", 8);
    return (uint32_t)crc32_z(c, (const Bytef *)digits + 8, n - (size_t)(digits - text) - 8);
}

/* The replica files, one per rank of the grid (a manifest grows with the grid): each
 * with its owner and CRC-32, so that a resume tells a file swapped with another
 * rank's, a copy of one, or one of another run from the file written there. (Not
 * "crc32": the manifest's own is found as the first member of that name.) */
static void put_replica_files(FILE *f, const bp_manifest *mf) {
    if (!mf->replica_key[0]) return;
    fprintf(f, ",\"replica_key\":\"%s\",\"replica_files\":[", mf->replica_key);
    for (int s = 0; s < mf->pp; s++)
        for (int t = 0; t < mf->tp; t++)
            for (int d = 0; d < mf->dp; d++) {
                const char *sep = s || t || d ? "," : "";
                if (!mf->replica_crc) {
                    fprintf(f, "%s\"stage%d-tp%d-dp%d.replica\"", sep, s, t, d);
                    continue;
                }
                fprintf(f,
                        "%s{\"file\":\"stage%d-tp%d-dp%d.replica\",\"stage\":%d,\"tp\":%d,"
                        "\"dp\":%d,\"checksum\":\"%08x\"}",
                        sep, s, t, d, s, t, d,
                        (unsigned)mf->replica_crc[bp_checkpoint_replica_index(s, t, d, mf->tp, mf->dp)]);
            }
    fputc(']', f);
}

bp_status bp_manifest_write(const char *ckpt_dir, const bp_manifest *mf, bp_err *err) {
    char *text = NULL, path[BP_PATH_MAX];
    size_t k = 0;
    FILE *f = open_memstream(&text, &k);
    if (!f) return bp_fail(err, BP_ENOMEM, "out of memory for the manifest of %s", ckpt_dir);
    fprintf(f,
            "{\"format\":\"bagpipe-checkpoint\",\"version\":1,\"step\":%" PRId64
            ",\"dp\":%d,\"pp\":%d,\"tp\":%d,\"dp_algo\":\"%s\",\"replicas\":\"%s\","
            "\"partition\":\"%s\",\"shards\":[",
            mf->step, mf->dp, mf->pp, mf->tp, mf->dp_algo, mf->replicas, mf->partition);
    for (int s = 0; s < mf->pp; s++)
        for (int t = 0; t < mf->tp; t++)
            fprintf(f,
                    "%s{\"stage\":%d,\"tp\":%d,\"weights\":\"stage%d-tp%d.safetensors\","
                    "\"state\":\"stage%d-tp%d.state\"}",
                    s || t ? "," : "", s, t, s, t, s, t);
    fputc(']', f);
    put_replica_files(f, mf);
    if (mf->bucket_mb > 0) fprintf(f, ",\"bucket_mb\":%.17g", mf->bucket_mb);
    fprintf(f, "," CRC_KEY "00000000\"}\n");
    bool bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (bad || !text) {
        free(text);
        return bp_fail(err, BP_ENOMEM, "out of memory for the manifest of %s", ckpt_dir);
    }
    char *digits = strstr(text, CRC_KEY) + strlen(CRC_KEY);
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", manifest_crc(text, k, digits));
    memcpy(digits, hex, 8);
    bp_status rc = bp_path_join(path, sizeof path, ckpt_dir, MANIFEST, err);
    if (rc == BP_OK) rc = bp_write_file_atomic(path, text, k, err);
    free(text);
    return rc;
}

static int manifest_fields(const bp_json *j, bp_manifest *mf) {
    unsigned long long step = 0, dp = 0, pp = 0, tp = 0;
    int ok = bp_json_str_eq(j, bp_json_get(j, 0, "format"), "bagpipe-checkpoint") &&
             bp_json_uint(j, bp_json_get(j, 0, "step"), &step) &&
             bp_json_uint(j, bp_json_get(j, 0, "dp"), &dp) &&
             bp_json_uint(j, bp_json_get(j, 0, "pp"), &pp) &&
             bp_json_uint(j, bp_json_get(j, 0, "tp"), &tp) && dp >= 1 && pp >= 1 && tp >= 1 &&
             dp < (1u << 24) && pp < (1u << 24) && tp < (1u << 24) &&
             bp_json_str_copy(j, bp_json_get(j, 0, "dp_algo"), mf->dp_algo, sizeof mf->dp_algo) &&
             bp_json_str_copy(j, bp_json_get(j, 0, "replicas"), mf->replicas, sizeof mf->replicas) &&
             bp_json_str_copy(j, bp_json_get(j, 0, "partition"), mf->partition,
                              sizeof mf->partition);
    /* Absent from checkpoints without replica files (and those of older versions). */
    int key = bp_json_get(j, 0, "replica_key");
    ok = ok && (key < 0 || (bp_json_str_copy(j, key, mf->replica_key, sizeof mf->replica_key) &&
                            mf->replica_key[0]));
    /* Absent unless --bucket-mb auto had measured when it was saved. */
    int bucket = bp_json_get(j, 0, "bucket_mb");
    double mb = bucket >= 0 && j->nodes[bucket].type == BP_JSON_NUMBER ? j->nodes[bucket].num : 0;
    ok = ok && (bucket < 0 || (mb > 0 && mb <= 1e6));
    mf->bucket_mb = bucket >= 0 ? mb : 0;
    mf->step = (int64_t)step;
    mf->dp = (int)dp;
    mf->pp = (int)pp;
    mf->tp = (int)tp;
    return ok;
}

/* ckpt_dir's manifest, its CRC verified, parsed into j, whose strings point into
 * *text: free both after use. */
static bp_status load(const char *ckpt_dir, bp_json *j, char **text_out, bp_err *err) {
    char path[BP_PATH_MAX];
    bp_bytes b = {0};
    bp_status rc = bp_path_join(path, sizeof path, ckpt_dir, MANIFEST, err);
    if (rc == BP_OK) rc = bp_read_file(path, &b, err);
    if (rc) return rc;
    /* The digits are found in the raw bytes, so the file must be text without NULs. */
    char *text = malloc(b.n + 1), *digits = NULL;
    if (text) {
        memcpy(text, b.data, b.n);
        text[b.n] = '\0';
        digits = strlen(text) == b.n ? strstr(text, CRC_KEY) : NULL;
    }
    unsigned stored = 0;
    int ok = digits && (size_t)(digits - text) + strlen(CRC_KEY) + 8 <= b.n &&
             sscanf(digits + strlen(CRC_KEY), "%8x", &stored) == 1 &&
             manifest_crc(text, b.n, digits + strlen(CRC_KEY)) == stored;
    if (!ok)
        rc = bp_fail(err, BP_EFORMAT, MANIFEST " is damaged (checksum mismatch)");
    else
        rc = bp_json_parse(text, b.n, j, err);
    *text_out = text;
    free(b.data);
    return rc;
}

bp_status bp_manifest_read(const char *ckpt_dir, bp_manifest *mf, bp_err *err) {
    bp_json j = {0};
    char *text = NULL;
    memset(mf, 0, sizeof *mf);
    bp_status rc = load(ckpt_dir, &j, &text, err);
    if (rc == BP_OK && !manifest_fields(&j, mf))
        rc = bp_fail(err, BP_EFORMAT, MANIFEST " lacks a field or has a bad value");
    bp_json_free(&j);
    free(text);
    return rc;
}

/* Replica file entry e (an object naming its owner and checksum) into crcs. */
static bool replica_entry(const bp_json *j, int e, const bp_manifest *mf, uint32_t *crcs) {
    unsigned long long s, t, d;
    char hex[16];
    unsigned crc;
    if (!bp_json_uint(j, bp_json_get(j, e, "stage"), &s) || !bp_json_uint(j, bp_json_get(j, e, "tp"), &t) ||
        !bp_json_uint(j, bp_json_get(j, e, "dp"), &d) || s >= (unsigned)mf->pp || t >= (unsigned)mf->tp ||
        d >= (unsigned)mf->dp || !bp_json_str_copy(j, bp_json_get(j, e, "checksum"), hex, sizeof hex) ||
        strlen(hex) != 8 || sscanf(hex, "%8x", &crc) != 1)
        return false;
    crcs[bp_checkpoint_replica_index((int)s, (int)t, (int)d, mf->tp, mf->dp)] = crc;
    return true;
}

bp_status bp_manifest_replica_crcs(const char *ckpt_dir, const bp_manifest *mf, uint32_t **crcs,
                                   bp_err *err) {
    bp_json j = {0};
    char *text = NULL;
    *crcs = NULL;
    bp_status rc = load(ckpt_dir, &j, &text, err);
    int a = rc == BP_OK ? bp_json_get(&j, 0, "replica_files") : -1;
    int first = a >= 0 && j.nodes[a].type == BP_JSON_ARRAY ? j.nodes[a].child : -1;
    /* Names alone (an older version): nothing to check against. */
    if (rc || first < 0 || j.nodes[first].type != BP_JSON_OBJECT) {
        bp_json_free(&j);
        free(text);
        return rc;
    }
    size_t n = (size_t)mf->dp * (size_t)mf->pp * (size_t)mf->tp, seen = 0;
    *crcs = calloc(n, sizeof **crcs);
    if (!*crcs) rc = bp_fail(err, BP_ENOMEM, "out of memory for the replica files' checksums");
    for (int e = first; rc == BP_OK && e >= 0; e = j.nodes[e].next, seen++)
        if (seen >= n || !replica_entry(&j, e, mf, *crcs))
            rc = bp_fail(err, BP_EFORMAT, MANIFEST " has a bad replica file entry");
    if (rc == BP_OK && seen != n)
        rc = bp_fail(err, BP_EFORMAT, MANIFEST " lists %zu replica files for %zu ranks", seen, n);
    if (rc) {
        free(*crcs);
        *crcs = NULL;
    }
    bp_json_free(&j);
    free(text);
    return rc;
}

bp_status bp_checkpoint_resolve(const char *dir, char *out, size_t n, bp_err *err) {
    char path[BP_PATH_MAX];
    bp_bytes latest = {0};
    /* '' would join to /latest and /manifest.json: files at the root. */
    if (!dir[0]) return bp_fail(err, BP_EUSAGE, "an empty path; give a checkpoint directory");
    bp_status rc = bp_path_join(path, sizeof path, dir, "latest", err);
    if (rc) return rc;
    if (!bp_path_exists(path)) {
        if (strlen(dir) >= n) return bp_fail(err, BP_EUSAGE, "path too long: %s", dir);
        memcpy(out, dir, strlen(dir) + 1);
        return BP_OK;
    }
    if ((rc = bp_read_file(path, &latest, err))) return rc;
    size_t k = latest.n;
    while (k > 0 && (latest.data[k - 1] == '\n' || latest.data[k - 1] == ' ')) k--;
    int ok = k > strlen(CKPT_PREFIX) && k < 64 &&
             memcmp(latest.data, CKPT_PREFIX, strlen(CKPT_PREFIX)) == 0 &&
             !memchr(latest.data, '/', k) && !memchr(latest.data, '\0', k);
    char name[64];
    if (ok) {
        memcpy(name, latest.data, k);
        name[k] = '\0';
    }
    free(latest.data);
    if (!ok) return bp_fail(err, BP_EFORMAT, "%s does not name a checkpoint", path);
    return bp_path_join(out, n, dir, name, err);
}

/* Whether name is exactly what bp_checkpoint_dir writes: ckpt-<step, 8 digits or
 * more, no extra leading zero>. A user's "ckpt-00000005-best" is not. */
static bool is_checkpoint_name(const char *name) {
    const char *d = name + strlen(CKPT_PREFIX);
    if (strncmp(name, CKPT_PREFIX, strlen(CKPT_PREFIX)) != 0 || strlen(d) < 8 || strlen(d) > 19)
        return false;
    for (const char *p = d; *p; p++)
        if (*p < '0' || *p > '9') return false;
    char again[32];
    snprintf(again, sizeof again, "%08lld", strtoll(d, NULL, 10));
    return strcmp(again, d) == 0;
}

/* Whether an entry of a checkpoint directory is a file we write there: the
 * manifest, a shard, a replica file, or the temporary name of one (core/file.c)
 * left by a crash. */
static bool is_our_file(const char *name) {
    int s, t, d, k = -1;
    char ext[16] = "";
    if (strncmp(name, MANIFEST, strlen(MANIFEST)) == 0)
        k = (int)strlen(MANIFEST);
    else if (sscanf(name, "stage%d-tp%d-dp%d.%15[a-z]%n", &s, &t, &d, ext, &k) == 4) {
        if (strcmp(ext, "replica") != 0) return false;
    } else if (sscanf(name, "stage%d-tp%d.%15[a-z]%n", &s, &t, ext, &k) != 3 ||
               (strcmp(ext, "safetensors") != 0 && strcmp(ext, "state") != 0))
        return false;
    return name[k] == '\0' || strncmp(name + k, ".tmp.", 5) == 0;
}

/* Open out_dir/name as a checkpoint directory of ours: a real directory (never a
 * symlink's target), holding our manifest and nothing but files we write. */
static DIR *open_ours(int out_fd, const char *name) {
    int fd = openat(out_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    bool ours = true, manifest = false;
    struct stat st;
    for (struct dirent *e; ours && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        ours = is_our_file(e->d_name) && fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISREG(st.st_mode);
        manifest |= strcmp(e->d_name, MANIFEST) == 0;
    }
    if (ours && manifest) {
        rewinddir(d);
        return d;
    }
    closedir(d);
    return NULL;
}

/* Remove out_dir/name if it is a checkpoint of ours; anything else stays. */
static void remove_ours(int out_fd, const char *name) {
    DIR *d = open_ours(out_fd, name);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));)
        if (is_our_file(e->d_name)) unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    unlinkat(out_fd, name, AT_REMOVEDIR);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Keep the committed checkpoint and the keep-1 newest of ours before it. Directories
 * of later steps (left by an interrupted earlier run) are not touched, nor anything
 * that is not a checkpoint directory we wrote. */
static void prune(const char *out_dir, const char *committed, int keep) {
    DIR *d = opendir(out_dir);
    if (!d) return;
    char *names[4096];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 4096;) {
        if (!is_checkpoint_name(e->d_name) || strcmp(e->d_name, committed) >= 0) continue;
        DIR *ours = open_ours(dirfd(d), e->d_name);
        if (!ours) continue;
        closedir(ours);
        if ((names[n] = strdup(e->d_name))) n++;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; i < n; i++) {
        if (i < n - (keep - 1)) remove_ours(dirfd(d), names[i]);
        free(names[i]);
    }
    closedir(d);
}

bp_status bp_checkpoint_commit(const char *out_dir, int64_t step, int keep, bp_err *err) {
    char path[BP_PATH_MAX], line[80];
    int k = snprintf(line, sizeof line, CKPT_PREFIX "%08" PRId64 "\n", step);
    bp_status rc = bp_path_join(path, sizeof path, out_dir, "latest", err);
    if (rc == BP_OK) rc = bp_write_file_atomic(path, line, (size_t)k, err);
    if (rc) return rc;
    line[k - 1] = '\0';
    if (keep > 0) prune(out_dir, line, keep);
    return BP_OK;
}

#include "fuzz.h"

#include "bagpipe/status.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

long bp_fuzz_accepted;

static const uint8_t *find_sep(const uint8_t *p, size_t n) {
    for (size_t i = 0; i + BP_FUZZ_SEP_LEN <= n; i++)
        if (p[i] == (uint8_t)BP_FUZZ_SEP[0] && memcmp(p + i, BP_FUZZ_SEP, BP_FUZZ_SEP_LEN) == 0)
            return p + i;
    return NULL;
}

int bp_fuzz_split(const uint8_t *data, size_t size, bp_fuzz_part *parts, int max) {
    int k = 0;
    for (int i = 0; i < max; i++) parts[i] = (bp_fuzz_part){(const uint8_t *)"", 0};
    while (k < max) {
        const uint8_t *sep = k + 1 < max ? find_sep(data, size) : NULL;
        size_t len = sep ? (size_t)(sep - data) : size;
        parts[k].data = data;
        parts[k].n = len;
        k++;
        if (!sep) break;
        data = sep + BP_FUZZ_SEP_LEN;
        size -= len + BP_FUZZ_SEP_LEN;
    }
    return k;
}

static char dir_path[4096];

/* Remove the directory and whatever the harness left in it (one level of
 * subdirectories: the checkpoint harness writes out/ckpt-N/). */
static void remove_tree(const char *path, int depth) {
    DIR *d = opendir(path);
    if (d) {
        char child[4096 + 512];
        for (struct dirent *e; (e = readdir(d));) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            if (unlink(child) != 0 && depth < 3) remove_tree(child, depth + 1);
        }
        closedir(d);
    }
    rmdir(path);
}

static void remove_dir(void) {
    if (dir_path[0]) remove_tree(dir_path, 0);
}

const char *bp_fuzz_dir(void) {
    if (!dir_path[0]) {
        /* Memory-backed by default: on a disk, file I/O would cap the harness at a
         * few hundred inputs per second instead of thousands. */
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir_path, sizeof dir_path, "%s/bagpipe-fuzz-XXXXXX", tmp);
        if (!mkdtemp(dir_path)) {
            perror("bagpipe fuzz: mkdtemp");
            abort();
        }
        atexit(remove_dir);
    }
    return dir_path;
}

void bp_fuzz_path(char *buf, size_t n, const char *name) {
    int k = snprintf(buf, n, "%s/%s", bp_fuzz_dir(), name);
    if (k < 0 || (size_t)k >= n) abort();
}

void bp_fuzz_write(const char *path, const void *data, size_t n) {
    if (!data) {
        unlink(path);
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

int bp_fuzz_reject(int rc, const bp_err *err) {
    static int verbose = -1;
    if (verbose < 0) {
        const char *v = getenv("BP_FUZZ_VERBOSE");
        verbose = v && *v && strcmp(v, "0") != 0;
    }
    if (verbose && rc) fprintf(stderr, "rejected: %s\n", err->msg);
    return rc;
}

/* Runs a harness's LLVMFuzzerTestOneInput on files, without libFuzzer: any
 * compiler builds it, and tests/fuzz uses it to replay the corpus (seeds and
 * the inputs of fixed crashes) in every build, sanitized or not.
 *
 *   replay_<harness> [--min-accepted K] FILE_OR_DIR...
 *
 * Directories are read one level deep, in name order. Exits non-zero when an
 * input cannot be read or fewer than K inputs were accepted (fuzz.h). A crash
 * is a crash: the process dies with the harness. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static long runs;

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            uint8_t *bigger = realloc(buf, cap *= 2);
            if (!bigger) free(buf);
            buf = bigger;
        }
    }
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(buf);
        return 1;
    }
    /* An exact-size copy, so that AddressSanitizer sees reads past the input. */
    uint8_t *input = malloc(n ? n : 1);
    if (!input) abort();
    memcpy(input, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(input, n);
    free(input);
    runs++;
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        perror(path);
        return 1;
    }
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char **more = realloc(names, (n + 1) * sizeof *names);
        if (!more || !(more[n] = malloc(strlen(path) + strlen(e->d_name) + 2))) abort();
        names = more;
        sprintf(names[n++], "%s/%s", path, e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) bad |= run_file(names[i]);
        free(names[i]);
    }
    free(names);
    return bad;
}

int main(int argc, char **argv) {
    long min_accepted = 0;
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int bad = 0, first = 1;
    if (argc > 2 && strcmp(argv[1], "--min-accepted") == 0) {
        min_accepted = strtol(argv[2], NULL, 10);
        first = 3;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: %s [--min-accepted K] FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    for (int i = first; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            bad = 1;
        } else {
            bad |= S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
        }
    }
    printf("%ld inputs run, %ld accepted\n", runs, bp_fuzz_accepted);
    if (bp_fuzz_accepted < min_accepted) {
        fprintf(stderr,
                "fewer than %ld inputs accepted: is the seed corpus out of date? If a file "
                "format or an option changed, run fuzz/seeds.sh (fuzz/README.md)\n",
                min_accepted);
        bad = 1;
    }
    return bad;
}

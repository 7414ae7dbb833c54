/* --matmul auto: each product shape goes to the library that computed it fastest
 * on this CPU.
 *
 * A shape (transposes, sizes and strides) is measured the first time it comes, on
 * a copy of its output, so the product itself then runs once as usual: every
 * library computes it a few times and the least time per product counts. OpenBLAS
 * keeps a shape unless another library is clearly (AUTO_MARGIN) faster, so that
 * noise does not move it. The choices are kept in a file per CPU (vendor, family,
 * model, stepping) and OpenBLAS core type (OPENBLAS_CORETYPE changes its kernels)
 * under the cache directory, so a machine measures each shape once; a file that
 * cannot be read or written only costs the measurements again. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/blas_impl.h"
#include "core/file.h"
#include "core/timer.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#define AUTO_MAX 512        /* shapes remembered; later ones run on OpenBLAS */
#define AUTO_MARGIN 0.95    /* another library must take less than this of OpenBLAS's time */
#define AUTO_SECONDS 2e-3   /* each library runs a shape for about this long, 3 times */

typedef struct auto_entry {
    bp_gemm_shape s;
    bp_blas_lib lib;
    bool used; /* picked by this process (the file may hold other runs' shapes) */
} auto_entry;

static struct {
    pthread_mutex_t mu;
    auto_entry e[AUTO_MAX];
    int n;
    char path[BP_PATH_MAX]; /* "" : no file */
} tab = {.mu = PTHREAD_MUTEX_INITIALIZER};

static bool same_shape(const bp_gemm_shape *a, const bp_gemm_shape *b) {
    return a->ta == b->ta && a->tb == b->tb && a->M == b->M && a->N == b->N && a->K == b->K &&
           a->lda == b->lda && a->ldb == b->ldb && a->ldc == b->ldc;
}

/* The least seconds per product of `lib` on g. */
static double time_lib(bp_blas_lib lib, const bp_gemm_args *g) {
    double t0 = bp_now();
    bp_blas_run(lib, g); /* first call: oneDNN generates its kernel, caches fill */
    double once = bp_now() - t0, best = once;
    int reps = once > 0 && once < AUTO_SECONDS ? (int)(AUTO_SECONDS / once) : 1;
    for (int r = 0; r < 3; r++) {
        t0 = bp_now();
        for (int i = 0; i < reps; i++) bp_blas_run(lib, g);
        double t = (bp_now() - t0) / reps;
        best = t < best ? t : best;
    }
    return best;
}

static bp_blas_lib measure(const bp_gemm_args *g) {
    size_t n = (size_t)(g->s.M - 1) * (size_t)g->s.ldc + (size_t)g->s.N;
    float *c = malloc(n * sizeof *c);
    if (!c) return BP_BLAS_OPENBLAS;
    bp_gemm_args copy = *g;
    copy.C = c;
    bp_blas_lib best = BP_BLAS_OPENBLAS;
    double t_openblas = 0, t_best = 0;
    for (int lib = 0; lib < BP_BLAS_LIBS; lib++) {
        if (!bp_blas_available((bp_blas_lib)lib)) continue;
        memcpy(c, g->C, n * sizeof *c); /* beta != 0 reads it; NaN-free either way */
        double t = time_lib((bp_blas_lib)lib, &copy);
        if (lib == BP_BLAS_OPENBLAS) t_openblas = t_best = t;
        else if (t < t_best && t < AUTO_MARGIN * t_openblas) best = (bp_blas_lib)lib, t_best = t;
    }
    free(c);
    return best;
}

/* ---- the machine's file ---- */

static void cpu_key(char *out, size_t n) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    char vendor[13] = "cpu";
#if defined(__x86_64__) || defined(__i386__)
    if (__get_cpuid(0, &a, &b, &c, &d)) {
        memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
        vendor[12] = '\0';
    }
    if (!__get_cpuid(1, &a, &b, &c, &d)) a = 0;
#endif
    const char *core = getenv("OPENBLAS_CORETYPE");
    snprintf(out, n, "%s-%x-%s", vendor, a, core && *core ? core : "default");
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            *p = '-';
}

static bp_blas_lib lib_named(const char *name) {
    for (int lib = 0; lib < BP_BLAS_LIBS; lib++)
        if (strcmp(name, bp_blas_name((bp_blas_lib)lib)) == 0) return (bp_blas_lib)lib;
    return BP_BLAS_AUTO;
}

/* Lines "ta tb M N K lda ldb ldc library"; a line that is not one, or names a
 * library this build lacks, is measured again. */
static void load(const char *text) {
    for (const char *p = text; p && *p && tab.n < AUTO_MAX; p = strchr(p, '\n'), p = p ? p + 1 : p) {
        int ta, tb;
        char name[16];
        bp_gemm_shape s;
        if (sscanf(p, "%d %d %d %d %d %d %d %d %15s", &ta, &tb, &s.M, &s.N, &s.K, &s.lda, &s.ldb,
                   &s.ldc, name) != 9)
            continue;
        bp_blas_lib lib = lib_named(name);
        if (lib == BP_BLAS_AUTO || !bp_blas_available(lib)) continue;
        s.ta = ta != 0, s.tb = tb != 0;
        tab.e[tab.n++] = (auto_entry){s, lib, false};
    }
}

static void save(void) {
    if (!tab.path[0]) return;
    size_t cap = (size_t)tab.n * 96 + 1, len = 0;
    char *text = malloc(cap);
    if (!text) return;
    for (int i = 0; i < tab.n; i++) {
        const bp_gemm_shape *s = &tab.e[i].s;
        len += (size_t)snprintf(text + len, cap - len, "%d %d %d %d %d %d %d %d %s\n", s->ta, s->tb,
                                s->M, s->N, s->K, s->lda, s->ldb, s->ldc,
                                bp_blas_name(tab.e[i].lib));
    }
    bp_err err;
    (void)bp_write_file_atomic(tab.path, text, len, &err); /* a cache: failing costs time only */
    free(text);
}

bp_status bp_blas_auto_open(const char *cache_dir, bp_err *err) {
    pthread_mutex_lock(&tab.mu);
    tab.n = 0;
    tab.path[0] = '\0';
    bp_status rc = BP_OK;
    if (cache_dir && cache_dir[0]) {
        char key[64], name[96];
        cpu_key(key, sizeof key);
        snprintf(name, sizeof name, "matmul-%s.txt", key);
        rc = bp_path_join(tab.path, sizeof tab.path, cache_dir, name, err);
        if (rc == BP_OK && bp_mkdir_p(cache_dir, err) != BP_OK) {
            tab.path[0] = '\0'; /* no cache: measure every run */
        } else if (rc == BP_OK && bp_path_exists(tab.path)) {
            bp_bytes b;
            if (bp_read_file(tab.path, &b, err) == BP_OK) {
                char *text = realloc(b.data, b.n + 1);
                if (text) text[b.n] = '\0', load(text);
                free(text ? text : (char *)b.data);
            }
        }
    }
    pthread_mutex_unlock(&tab.mu);
    return rc;
}

bp_blas_lib bp_blas_auto_pick(const bp_gemm_args *g) {
    pthread_mutex_lock(&tab.mu);
    bp_blas_lib lib = BP_BLAS_OPENBLAS;
    int i = 0;
    while (i < tab.n && !same_shape(&tab.e[i].s, &g->s)) i++;
    if (i < tab.n) {
        lib = tab.e[i].lib;
        tab.e[i].used = true;
    } else if (tab.n < AUTO_MAX) {
        lib = measure(g);
        tab.e[tab.n++] = (auto_entry){g->s, lib, true};
        save();
    }
    pthread_mutex_unlock(&tab.mu);
    return lib;
}

/* The shapes this process's products went to, per library. */
void bp_blas_auto_describe(char *buf, size_t n) {
    pthread_mutex_lock(&tab.mu);
    int count[BP_BLAS_LIBS] = {0}, used = 0;
    for (int i = 0; i < tab.n; i++)
        if (tab.e[i].used) count[tab.e[i].lib]++, used++;
    if (!used) {
        snprintf(buf, n, "auto (no products yet)");
        pthread_mutex_unlock(&tab.mu);
        return;
    }
    size_t len = (size_t)snprintf(buf, n, "auto (");
    for (int lib = 0; lib < BP_BLAS_LIBS && len < n; lib++)
        if (count[lib])
            len += (size_t)snprintf(buf + len, n - len, "%s%s %d", len > 6 ? ", " : "",
                                    bp_blas_name((bp_blas_lib)lib), count[lib]);
    if (len < n) snprintf(buf + len, n - len, " shapes)");
    pthread_mutex_unlock(&tab.mu);
}

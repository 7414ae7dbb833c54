/* The recorder of scripts/step-walk.sh, preloaded into a bagpipe built with
 * -finstrument-functions: every distinct (caller, callee) pair of bagpipe's own
 * functions called while some thread is inside the root function ($BP_WALK_ROOT,
 * its offset in the executable), on any thread (the communication threads' calls
 * during the step belong to it), is written at exit to $BP_WALK_OUT.<pid> as two
 * hexadecimal offsets a line. Compiled without instrumentation. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { TABLE = 1 << 16, DEPTH = 4096 };

static _Atomic uint64_t edges[TABLE]; /* caller << 32 | callee, 0: free */
static atomic_int inside;             /* threads inside the root now */
static uintptr_t base, root;
static _Thread_local uintptr_t stack[DEPTH];
static _Thread_local int depth;

__attribute__((no_instrument_function)) static void init(void *fn) {
    Dl_info info;
    if (base || !dladdr(fn, &info)) return;
    base = (uintptr_t)info.dli_fbase;
    const char *r = getenv("BP_WALK_ROOT");
    root = r ? (uintptr_t)strtoull(r, NULL, 16) : 0;
}

__attribute__((no_instrument_function)) static void add(uint64_t key) {
    for (uint64_t h = key * 0x9E3779B97F4A7C15ull >> 48;; h = (h + 1) % TABLE) {
        uint64_t seen = atomic_load_explicit(&edges[h], memory_order_relaxed);
        if (seen == key) return;
        if (seen == 0 && atomic_compare_exchange_strong(&edges[h], &seen, key)) return;
        if (seen == key) return;
    }
}

__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *fn, void *site) {
    (void)site;
    init(fn);
    uintptr_t f = (uintptr_t)fn - base;
    if (f == root) atomic_fetch_add(&inside, 1);
    if (atomic_load_explicit(&inside, memory_order_relaxed) > 0)
        add((uint64_t)(depth ? stack[depth - 1] : 0) << 32 | f);
    if (depth < DEPTH) stack[depth] = f;
    depth++;
}

__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *fn, void *site) {
    (void)site;
    depth--;
    if ((uintptr_t)fn - base == root) atomic_fetch_sub(&inside, 1);
}

__attribute__((no_instrument_function, destructor)) static void dump(void) {
    const char *out = getenv("BP_WALK_OUT");
    if (!out) return;
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", out, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return;
    for (int i = 0; i < TABLE; i++)
        if (edges[i])
            fprintf(f, "%llx %llx\n", (unsigned long long)(edges[i] >> 32),
                    (unsigned long long)(edges[i] & 0xffffffffu));
    fclose(f);
}

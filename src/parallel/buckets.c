#include "parallel/buckets.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Buckets of whole tensors from the end of the buffer; a tensor larger than the
 * bucket size gets a bucket of its own. */
int bp_buckets_plan(const bp_bucket_tensor *tt, int nt, size_t bucket_bytes, int skip,
                    bp_bucket *out) {
    size_t limit = bucket_bytes / sizeof(float);
    int n = 0;
    for (int t = nt - 1; t >= 0;) {
        if (t == skip) {
            t--;
            continue;
        }
        bp_bucket *b = &out[n++];
        *b = (bp_bucket){.min_block = INT_MAX};
        size_t end = tt[t].offset + tt[t].numel;
        do {
            b->first_tensor = t;
            b->offset = tt[t].offset;
            b->len = end - tt[t].offset;
            b->n_tensors++;
            if (tt[t].block < b->min_block) b->min_block = tt[t].block;
            t--;
        } while (t >= 0 && t != skip && end - tt[t].offset <= limit);
    }
    return n;
}

static bp_status plan(bp_bucketer *bk, const bp_model *m, size_t bucket_bytes, int skip,
                      bp_err *err) {
    int nt = bp_model_num_tensors(m);
    bk->buckets = calloc((size_t)nt, sizeof *bk->buckets);
    bp_bucket_tensor *tt = malloc((size_t)nt * sizeof *tt);
    if (!bk->buckets || !tt) {
        free(tt);
        free(bk->buckets);
        bk->buckets = NULL;
        return bp_fail(err, BP_ENOMEM, "cannot allocate %d buckets", nt);
    }
    for (int t = 0; t < nt; t++) {
        const bp_tensor_info *ti = bp_model_tensor(m, t);
        tt[t] = (bp_bucket_tensor){ti->offset, ti->numel, ti->block};
    }
    bk->n = bp_buckets_plan(tt, nt, bucket_bytes, skip, bk->buckets);
    free(tt);
    return BP_OK;
}

/* The thread mostly sleeps while its messages travel (bp_comm_set_poll) and has
 * little to do when it wakes, but backward holds the core then: ten steps more
 * priority (lower nice) than the rest of the process lets it run at once, as
 * communication streams get a high priority on accelerators. Best effort: without
 * the right to (CAP_SYS_NICE or RLIMIT_NICE) it keeps the process's priority.
 * On Linux, PRIO_PROCESS with a thread id sets one thread's nice value. */
static void raise_priority(void) {
#ifdef SYS_gettid
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, tid);
    if (errno == 0) (void)setpriority(PRIO_PROCESS, tid, nice - 10);
#endif
}

static void *thread_main(void *arg) {
    bp_bucketer *bk = arg;
    raise_priority();
    pthread_mutex_lock(&bk->mu);
    for (;;) {
        while (!bk->quit && !(bk->round_open && bk->next < bk->n &&
                              bk->lowest_done <= bk->buckets[bk->next].min_block))
            pthread_cond_wait(&bk->cv, &bk->mu);
        if (bk->quit) break;
        const bp_bucket *b = &bk->buckets[bk->next];
        int failed = bk->status != BP_OK; /* after a failure, skip the rest of the round */
        pthread_mutex_unlock(&bk->mu);
        bp_err err;
        bp_status rc = failed ? BP_OK : bk->run(bk->ctx, b, &err);
        pthread_mutex_lock(&bk->mu);
        if (rc != BP_OK && bk->status == BP_OK) {
            bk->status = rc;
            bk->err = err;
        }
        bk->next++;
        pthread_cond_broadcast(&bk->cv);
    }
    pthread_mutex_unlock(&bk->mu);
    return NULL;
}

bp_status bp_bucketer_init(bp_bucketer *bk, const bp_model *m, size_t bucket_bytes, int skip,
                           bp_bucket_fn run, void *ctx, bp_err *err) {
    memset(bk, 0, sizeof *bk);
    bk->run = run;
    bk->ctx = ctx;
    bp_status rc = plan(bk, m, bucket_bytes, skip, err);
    if (rc) return rc;
    bk->next = bk->n;
    pthread_mutex_init(&bk->mu, NULL);
    pthread_cond_init(&bk->cv, NULL);
    if (pthread_create(&bk->thread, NULL, thread_main, bk) != 0) {
        free(bk->buckets);
        return bp_fail(err, BP_EINTERNAL, "cannot start the communication thread");
    }
    return BP_OK;
}

void bp_bucketer_free(bp_bucketer *bk) {
    if (!bk->buckets) return;
    pthread_mutex_lock(&bk->mu);
    bk->quit = true;
    pthread_cond_broadcast(&bk->cv);
    pthread_mutex_unlock(&bk->mu);
    pthread_join(bk->thread, NULL);
    pthread_mutex_destroy(&bk->mu);
    pthread_cond_destroy(&bk->cv);
    free(bk->buckets);
    memset(bk, 0, sizeof *bk);
}

void bp_bucketer_begin(bp_bucketer *bk) {
    pthread_mutex_lock(&bk->mu);
    bk->lowest_done = INT_MAX;
    bk->next = 0;
    bk->status = BP_OK;
    bk->round_open = true;
    pthread_mutex_unlock(&bk->mu);
}

void bp_bucketer_block_done(void *bucketer, int block) {
    bp_bucketer *bk = bucketer;
    pthread_mutex_lock(&bk->mu);
    if (block < bk->lowest_done) bk->lowest_done = block;
    pthread_cond_broadcast(&bk->cv);
    pthread_mutex_unlock(&bk->mu);
}

/* Every block done (under bk->mu): the buckets left may all start. */
static void all_done(bp_bucketer *bk) {
    bk->lowest_done = INT_MIN;
    pthread_cond_broadcast(&bk->cv);
}

const bp_bucket *bp_bucketer_next(bp_bucketer *bk, int i) {
    pthread_mutex_lock(&bk->mu);
    all_done(bk);
    while (i < bk->n && bk->next <= i) pthread_cond_wait(&bk->cv, &bk->mu);
    const bp_bucket *b = i < bk->n && bk->status == BP_OK ? &bk->buckets[i] : NULL;
    pthread_mutex_unlock(&bk->mu);
    return b;
}

void bp_bucketer_fail(bp_bucketer *bk, bp_status rc, const bp_err *err) {
    pthread_mutex_lock(&bk->mu);
    if (rc != BP_OK && bk->status == BP_OK) {
        bk->status = rc;
        bk->err = *err;
    }
    pthread_mutex_unlock(&bk->mu);
}

bp_status bp_bucketer_finish(bp_bucketer *bk, bp_err *err) {
    pthread_mutex_lock(&bk->mu);
    all_done(bk);
    while (bk->next < bk->n) pthread_cond_wait(&bk->cv, &bk->mu);
    bk->round_open = false;
    bp_status rc = bk->status;
    if (rc && err) *err = bk->err;
    pthread_mutex_unlock(&bk->mu);
    return rc;
}

/* The ranks' agreement on a failure that some of them saw, and on their options
 * (trainer.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "bagpipe/comm_mpi.h"
#include "core/options.h"
#include "train/config.h"
#include "train/trainer.h"

bp_status bp_train_agree(bp_comm *c, bp_status rc, bool *together, bp_err *err) {
    if (bp_comm_size(c) == 1) {
        if (rc != BP_OK) *together = true;
        return rc;
    }
    /* failed, rank 0 failed, failed with a usage error */
    float v[3] = {rc != BP_OK, rc != BP_OK && bp_comm_rank(c) == 0, rc == BP_EUSAGE};
    bp_status mrc = bp_allreduce_sum(c, v, 3);
    if (mrc) return bp_comm_fail(c, mrc, err);
    if (v[0] == 0) return BP_OK;
    *together = true;
    if (rc != BP_OK) {
        if (bp_comm_rank(c) != 0 && v[1] > 0) bp_err_clear(err); /* rank 0 says it once */
        return rc;
    }
    bp_err_clear(err);
    return v[2] == v[0] ? BP_EUSAGE : BP_ECOMM;
}

/* Paths (DIR, FILE) may differ between ranks: each names a place on its own node. */
static bool per_node(const bp_option *o) {
    return o->metavar && (!strcmp(o->metavar, "DIR") || !strcmp(o->metavar, "FILE"));
}

/* Every option's value but paths, one "--name value" a line, in the table's order. */
static char *options_text(const bp_train_config *cfg, bp_err *err) {
    int n;
    bp_option *opts = bp_train_options_with(NULL, 0, &n);
    size_t cap = (size_t)n * (BP_PATH_MAX + 64) + 1, at = 0;
    char *text = opts ? malloc(cap) : NULL;
    for (int i = 0; text && i < n; i++) {
        if (per_node(&opts[i])) continue;
        char value[BP_PATH_MAX + 32];
        bp_options_value_text(&opts[i], cfg, value, sizeof value);
        at += (size_t)snprintf(text + at, cap - at, "--%s %s\n", opts[i].name, value);
    }
    free(opts);
    if (!text) bp_fail(err, BP_ENOMEM, "out of memory");
    return text;
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 14695981039346656037ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Where the first line in which a and b differ starts. */
static bool first_difference(const char *a, const char *b, size_t *at) {
    for (size_t line = 0, i = 0;; i++) {
        if (a[i] != b[i]) {
            *at = line;
            return true;
        }
        if (!a[i]) return false;
        if (a[i] == '\n') line = i + 1;
    }
}

static void copy_line(char *to, size_t size, const char *from) {
    snprintf(to, size, "%.*s", (int)strcspn(from, "\n"), from);
}

/* Rank 0's options, on every rank. */
static bp_status bcast_text(MPI_Comm comm, const char *own, char **text, bp_err *err) {
    unsigned long long len = strlen(own) + 1;
    int rc = MPI_Bcast(&len, 1, MPI_UNSIGNED_LONG_LONG, 0, comm);
    *text = rc == MPI_SUCCESS && len <= INT_MAX ? malloc(len) : NULL;
    if (!*text) return bp_fail(err, BP_ECOMM, "cannot receive rank 0's options");
    memcpy(*text, own, len);
    rc = MPI_Bcast(*text, (int)len, MPI_CHAR, 0, comm);
    (*text)[len - 1] = '\0';
    return rc == MPI_SUCCESS ? BP_OK : bp_fail(err, BP_ECOMM, "cannot receive rank 0's options");
}

/* The lowest rank whose options differ from rank 0's names the first such option. */
static bp_status name_difference(MPI_Comm comm, int rank, const char *own, bp_err *err) {
    char *zero;
    bp_status rc = bcast_text(comm, own, &zero, err);
    size_t at = 0;
    int first = rc == BP_OK && first_difference(own, zero, &at) ? rank : INT_MAX;
    if (MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        rc = bp_fail(err, BP_ECOMM, "cannot compare the ranks' options");
    if (rc == BP_OK && first == rank) {
        char mine[BP_PATH_MAX + 64], theirs[BP_PATH_MAX + 64];
        copy_line(mine, sizeof mine, own + at);
        copy_line(theirs, sizeof theirs, zero + at);
        rc = bp_fail(err, BP_EUSAGE,
                     "the ranks were given different options: %s on rank %d but %s on rank 0",
                     mine, rank, theirs);
    } else if (rc == BP_OK) {
        bp_err_clear(err);
        rc = BP_EUSAGE;
    }
    free(zero);
    return rc;
}

bp_status bp_train_agree_config(bp_comm *c, const bp_train_config *cfg, bp_err *err) {
    if (bp_comm_size(c) == 1) return BP_OK;
    MPI_Comm comm = bp_comm_mpi(c);
    char *own = options_text(cfg, err);
    /* A rank out of memory still takes part, with no options, and fails after. */
    const char *text = own ? own : "";
    /* Both the hash's max and its complement's max are this rank's only when no
     * rank's hash differs. */
    uint64_t h = fnv1a(text), v[2] = {h, ~h};
    int mrc = MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MAX, comm);
    bp_status rc = mrc != MPI_SUCCESS ? bp_fail(err, BP_ECOMM, "cannot compare the ranks' options")
                   : v[0] == h && v[1] == ~h ? BP_OK
                                              : name_difference(comm, bp_comm_rank(c), text, err);
    if (!own) rc = bp_fail(err, BP_ENOMEM, "out of memory");
    free(own);
    return rc;
}

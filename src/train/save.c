/* Checkpoints of the grid and resuming from them.
 *
 * Replica 0 writes one shard per stage; rank 0 writes the manifest and switches
 * `latest` once every stage has written (a barrier over replica 0's stages). With
 * the weight algorithms the replicas differ and are averaged first (a collective
 * over each stage's replicas), so a checkpoint holds one consensus model. Beside
 * it every rank writes its replica file when any rank keeps state the consensus
 * lacks (each replica's weights, an elastic center, error feedback), so that a
 * resume on the same grid and options continues exactly. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/finite.h"
#include "core/log.h"
#include "train/trainer_impl.h"

bp_status trainer_read_resume_manifest(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    char dir[BP_PATH_MAX];
    t->resuming = c->resume[0] != 0;
    if (!t->resuming) return BP_OK;
    bp_status rc = bp_checkpoint_resolve(c->resume, dir, sizeof dir, err);
    if (rc == BP_OK) rc = bp_manifest_read(dir, &t->resume_from, err);
    if (rc) return bp_err_context(err, "checkpoint %s", c->resume);
    snprintf(t->resume_dir, sizeof t->resume_dir, "%s", dir);
    if (t->resume_from.tp != c->tp)
        return bp_fail(err, BP_EUSAGE,
                       "checkpoint %s was written with --tp %d but this run has --tp %d", dir,
                       t->resume_from.tp, c->tp);
    if (t->resume_from.pp != c->pipeline.stages)
        return bp_fail(err, BP_EUSAGE,
                       "checkpoint %s was written with --pp %d but this run has --pp %d (a "
                       "checkpoint resumes on any --dp, but with its own pipeline stages)",
                       dir, t->resume_from.pp, c->pipeline.stages);
    if (c->pipeline.partition[0] && strcmp(c->pipeline.partition, t->resume_from.partition) != 0)
        return bp_fail(err, BP_EUSAGE,
                       "checkpoint %s was written with --partition %s but this run has "
                       "--partition %s",
                       dir, t->resume_from.partition, c->pipeline.partition);
    return BP_OK;
}

/* Rank 0 takes --out for this run: created, locked against a second run at the
 * same time (flock on the directory, released when the process ends), and refused
 * when it holds a run this one neither resumes nor was told to overwrite; then the
 * run's other outputs are checked. */
bp_status trainer_claim_out(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    char latest[BP_PATH_MAX];
    if (t->rank != 0) return BP_OK;
    bp_status rc = bp_mkdir_p(c->out, err);
    if (rc == BP_OK && (t->out_fd = open(c->out, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        rc = bp_fail(err, BP_EIO, "option --out: cannot open %s: %s", c->out, strerror(errno));
    if (rc == BP_OK && flock(t->out_fd, LOCK_EX | LOCK_NB) != 0)
        rc = bp_fail(err, BP_EUSAGE, "option --out: %s is in use by another run", c->out);
    if (rc == BP_OK) rc = bp_path_join(latest, sizeof latest, c->out, "latest", err);
    if (rc == BP_OK && !t->resuming && !c->overwrite && bp_path_exists(latest))
        rc = bp_fail(err, BP_EUSAGE,
                     "option --out: %s already holds a run; continue it with --resume %s, or "
                     "give --overwrite to start over",
                     c->out, c->out);
    return rc ? rc : bp_train_check_outputs(t->cfg, t->resuming, err);
}

void trainer_release_out(trainer *t) {
    if (t->out_fd >= 0) close(t->out_fd); /* and the lock with it */
    t->out_fd = -1;
}

bp_status trainer_resume(trainer *t, bp_err *err) {
    bp_checkpoint ck;
    bp_status rc = bp_checkpoint_open(t->cfg->resume, t->grid.p, t->grid.t, &ck, err);
    if (rc) return rc;
    bp_model_config saved;
    rc = bp_checkpoint_model_config(&ck, &saved, err);
    const bp_model_config *run = bp_model_get_config(bp_stage_model(t->stage, 0));
    if (rc == BP_OK) rc = bp_train_config_match(run, &saved, ck.dir, err);
    /* Every AvgPipe replica starts from the checkpoint's (averaged) model. */
    for (int j = 0; rc == BP_OK && j < bp_stage_replicas(t->stage); j++) {
        rc = bp_checkpoint_load_model(&ck, bp_stage_model(t->stage, j), err);
        if (rc == BP_OK) rc = bp_checkpoint_load_optim(&ck, bp_stage_optim(t->stage, j), err);
    }
    if (rc == BP_OK && ck.rs.step >= t->cfg->steps)
        rc = bp_fail(err, BP_EUSAGE,
                     "checkpoint %s is at step %lld: nothing to do with --steps %lld (give more "
                     "steps to continue it)",
                     ck.dir, (long long)ck.rs.step, (long long)t->cfg->steps);
    if (rc == BP_OK && (rc = bp_task_set_state(&t->task, &ck.rs, err)))
        bp_err_context(err, "checkpoint %s: stage%d-tp%d.state", ck.dir, t->grid.p, t->grid.t);
    if (rc == BP_OK) {
        t->step = t->first_step = ck.rs.step;
        bp_progress_note(&t->progress, "resumed from %s at step %lld (written by %d %s replicas)",
                         ck.dir, (long long)t->step, ck.manifest.dp, ck.manifest.replicas);
    }
    bp_checkpoint_close(&ck);
    return rc;
}

/* *buf, allocated on be once (bytes > 0). */
static bp_status once_on(const bp_backend *be, float **buf, size_t bytes, bp_err *err) {
    return *buf ? BP_OK : be->alloc(be, (void **)buf, bytes, "the averaged checkpoint", err);
}

/* *buf, allocated on the host once. */
static bp_status once_host(float **buf, size_t bytes, bp_err *err) {
    if (!*buf && !(*buf = malloc(bytes)))
        return bp_fail(err, BP_ENOMEM, "cannot allocate the checkpoint's host copy");
    return BP_OK;
}

/* The weights and optimizer state to save, copied to the host: this replica's, or,
 * when replicas differ (weight algorithms), their average over the stage's replicas
 * (collective). */
static bp_status checkpoint_state(trainer *t, const bp_real **params, bp_optim *view, bp_err *err) {
    const bp_backend *be = t->dev.be;
    bp_model *model = bp_stage_model(t->stage, 0);
    const bp_optim *optim = bp_stage_optim(t->stage, 0);
    bp_dp *dp = bp_stage_dp(t->stage);
    const float *p = bp_model_params(model), *m = optim->m, *v = optim->v;
    size_t bytes = bp_model_num_params(model) * sizeof(float);
    *view = *optim;
    *params = NULL;
    bp_status rc = BP_OK;
    if (bytes && bp_dp_replicas_differ(dp)) {
        rc = once_on(be, &t->avg_params, bytes, err);
        if (rc == BP_OK) rc = once_on(be, &t->avg_m, bytes, err);
        if (rc == BP_OK && v) rc = once_on(be, &t->avg_v, bytes, err);
        if (rc == BP_OK) rc = bp_dp_average_replicas(dp, t->avg_params, t->avg_m, t->avg_v, err);
        p = t->avg_params, m = t->avg_m, v = v ? t->avg_v : NULL;
    }
    if (rc == BP_OK && bytes) rc = once_host(&t->host_params, bytes, err);
    if (rc == BP_OK && bytes) rc = once_host(&t->host_m, bytes, err);
    if (rc == BP_OK && bytes && v) rc = once_host(&t->host_v, bytes, err);
    if (rc || !bytes) return rc;
    be->to_host(be, t->host_params, p, bytes);
    be->to_host(be, t->host_m, m, bytes);
    if (v) be->to_host(be, t->host_v, v, bytes);
    *params = t->host_params;
    view->m = t->host_m;
    view->v = v ? t->host_v : NULL;
    return BP_OK;
}

/* The options that decide what the replica files hold: the algorithm with its
 * settings (as on stage 0 without Optimus-CC's changes), the pipelines, the
 * optimizer and Optimus-CC's compression. The same on every rank. */
static void replica_key(const trainer *t, char *buf, size_t n) {
    bp_dp_config d;
    bp_occ_config occ;
    bp_optim_config oc;
    char algo[256];
    bp_train_dp_config(t->cfg, &d);
    bp_train_occ_config(t->cfg, &occ);
    bp_train_optim_config(t->cfg, &oc);
    bp_dp_describe(&d, algo, sizeof algo);
    snprintf(buf, n, "%s pipelines=%d optim=%s cb_rank=%d lep=%d sc_stages=%d sc_rank=%d", algo,
             bp_stage_replicas(t->stage), oc.kind == BP_OPTIM_ADAMW ? "adamw" : "sgd",
             occ.cb_rank, occ.lep, occ.sc_stages, occ.sc_rank);
}

bp_status trainer_replica_init(trainer *t, bp_err *err) {
    replica_key(t, t->replica_key, sizeof t->replica_key);
    bp_status rc = bp_dp_state(bp_stage_dp(t->stage), &t->replica_state, err);
    return rc ? rc : bp_pipe_state(bp_stage_pipe(t->stage), &t->replica_state, err);
}

bp_status trainer_replica_agree(trainer *t, bp_err *err) {
    float keeps = t->replica_state.n > 0;
    bp_status rc = t->size > 1 ? bp_allreduce_sum(t->meta, &keeps, 1) : BP_OK;
    t->replica_files = keeps > 0;
    return bp_comm_fail(t->meta, rc, err);
}

/* The replica state lives on the run's backend; its files are written from and read
 * into host copies of the same names (made once). */
static bp_status host_mirror(trainer *t, bp_err *err) {
    const bp_state_list *d = &t->replica_state;
    for (int i = t->replica_host.n; i < d->n; i++) {
        float *h = malloc((d->bufs[i].n ? d->bufs[i].n : 1) * sizeof *h);
        bp_status rc =
            h ? bp_state_add(&t->replica_host, h, d->bufs[i].n, err, "%s", d->bufs[i].name)
              : bp_fail(err, BP_ENOMEM, "cannot allocate the replica state's host copy");
        if (rc) {
            free(h);
            return rc;
        }
    }
    return BP_OK;
}

/* Buffer i of the replica state to or from its host copy; buffers of comm/'s own
 * (the ring's replicas) are host memory already. */
static void replica_copy(trainer *t, int i, bool to_host) {
    const bp_backend *be = t->dev.be;
    float *dev = t->replica_state.bufs[i].data, *host = t->replica_host.bufs[i].data;
    size_t n = t->replica_state.bufs[i].n;
    if (!be->owns(be, dev))
        memcpy(to_host ? host : dev, to_host ? dev : host, n * sizeof *dev);
    else if (to_host)
        bp_backend_get(be, host, dev, n);
    else
        bp_backend_put(be, dev, host, n);
}

void trainer_replica_free(trainer *t) {
    free(t->replica_crc);
    t->replica_crc = NULL;
    for (int i = 0; i < t->replica_host.n; i++) free(t->replica_host.bufs[i].data);
    bp_state_list_free(&t->replica_host);
    bp_state_list_free(&t->replica_state);
}

bp_status trainer_resume_replica(trainer *t, bp_err *err) {
    const bp_manifest *mf = &t->resume_from;
    if (!t->resuming || (!t->replica_files && !mf->replica_key[0])) return BP_OK;
    if (mf->replica_key[0] && mf->dp == t->grid.dp && strcmp(mf->replica_key, t->replica_key) == 0) {
        uint32_t *crcs = NULL;
        bp_status rc = host_mirror(t, err);
        if (rc == BP_OK) rc = bp_manifest_replica_crcs(t->resume_dir, mf, &crcs, err);
        if (rc == BP_OK)
            rc = bp_checkpoint_read_replica(t->resume_dir, mf, t->grid.p, t->grid.t, t->grid.d,
                                            crcs, &t->replica_host, err);
        free(crcs);
        if (rc) return bp_err_context(err, "checkpoint %s", t->resume_dir);
        for (int i = 0; i < t->replica_state.n; i++) replica_copy(t, i, false);
        return BP_OK;
    }
    if (t->rank == 0)
        bp_log_warn("checkpoint %s holds no replica state of this grid and options (it has %s "
                    "on --dp %d; this run: %s on --dp %d): every replica resumes from the "
                    "consensus model, so the run does not continue exactly as it would have",
                    t->resume_dir, mf->replica_key[0] ? mf->replica_key : "none", mf->dp,
                    t->replica_state.n || t->replica_files ? t->replica_key : "none", t->grid.dp);
    return BP_OK;
}

static void manifest_of(const trainer *t, bp_manifest *mf) {
    *mf = (bp_manifest){.step = t->step, .dp = t->grid.dp, .pp = t->grid.pp, .tp = t->grid.tp};
    bp_dp_config d;
    trainer_dp_config(t, &d);
    bp_dp_describe(&d, mf->dp_algo, sizeof mf->dp_algo);
    snprintf(mf->replicas, sizeof mf->replicas, "%s",
             bp_dp_replicas_differ(bp_stage_dp(t->stage)) ? "averaged" : "identical");
    snprintf(mf->partition, sizeof mf->partition, "%s", t->partition);
    if (t->replica_files) snprintf(mf->replica_key, sizeof mf->replica_key, "%s", t->replica_key);
    mf->replica_crc = t->replica_crc;
    mf->bucket_mb = t->bucket_mb_measured;
}

/* A checkpoint never holds non-finite weights (a step that diverged with
 * --skip-nonfinite skipping the ones after it): the run fails instead, and the
 * previous checkpoint stays the latest. */
static bp_status check_finite(const trainer *t, const bp_real *params, bp_err *err) {
    const bp_model *model = bp_stage_model(t->stage, 0);
    for (int i = 0; i < bp_model_num_tensors(model); i++) {
        const bp_tensor_info *ti = bp_model_tensor(model, i);
        if (!bp_all_finite(params + ti->offset, ti->numel))
            return bp_fail(err, BP_ENONFINITE,
                           "step %lld: weights of tensor %s are not finite; not saved (the last "
                           "checkpoint in %s is intact)",
                           (long long)t->step, ti->name, t->cfg->out);
    }
    return BP_OK;
}

/* Every rank's CRC into t->replica_crc on every rank, in the manifest's order: one
 * allreduce of 16-bit halves (exact in floats), which also makes the ranks meet. */
static bp_status share_crc(trainer *t, uint32_t crc, bp_err *err) {
    size_t n = (size_t)t->size;
    float *v = calloc(2 * n, sizeof *v);
    if (!t->replica_crc) t->replica_crc = calloc(n, sizeof *t->replica_crc);
    if (!v || !t->replica_crc) {
        free(v);
        return bp_fail(err, BP_ENOMEM, "out of memory for the replica files' checksums");
    }
    int own = bp_checkpoint_replica_index(t->grid.p, t->grid.t, t->grid.d, t->grid.tp, t->grid.dp);
    v[2 * own] = (float)(crc >> 16), v[2 * own + 1] = (float)(crc & 0xffff);
    bp_status rc = t->size > 1 ? bp_allreduce_sum(t->meta, v, 2 * n) : BP_OK;
    for (size_t i = 0; rc == BP_OK && i < n; i++)
        t->replica_crc[i] = (uint32_t)v[2 * i] << 16 | (uint32_t)v[2 * i + 1];
    free(v);
    return rc ? bp_comm_fail(t->meta, rc, err) : BP_OK;
}

/* Every rank writes its replica file, then all meet, so that the manifest (after
 * replica 0's barriers below) names only files on disk, with their checksums. A
 * rank that failed ends the whole job (cli/), so none waits forever. */
static bp_status write_replica(trainer *t, bp_err *err) {
    const char *dir = t->res->checkpoint;
    uint32_t crc = 0;
    bp_status rc = host_mirror(t, err);
    for (int i = 0; rc == BP_OK && i < t->replica_state.n; i++) replica_copy(t, i, true);
    if (rc == BP_OK) rc = bp_mkdir_p(dir, err);
    if (rc == BP_OK)
        rc = bp_checkpoint_write_replica(dir, t->grid.p, t->grid.t, t->grid.d, t->step,
                                         &t->replica_host, &crc, err);
    if (rc) {
        bp_checkpoint_discard_replica(dir, t->grid.p, t->grid.t, t->grid.d);
        return bp_err_context(err, "saving checkpoint %s", dir);
    }
    return share_crc(t, crc, err);
}

bp_status trainer_checkpoint(trainer *t, bp_err *err) {
    const bp_real *params;
    bp_optim view;
    bp_status rc = checkpoint_state(t, &params, &view, err);
    if (rc == BP_OK && trainer_in_replica0(t)) rc = check_finite(t, params, err);
    /* Every rank writes a replica file: none does unless all can save. */
    if (t->replica_files) rc = bp_train_agree(t->meta, rc, &t->res->stopped_together, err);
    if (rc == BP_OK)
        rc = bp_checkpoint_dir(t->cfg->out, t->step, t->res->checkpoint,
                               sizeof t->res->checkpoint, err);
    if (rc == BP_OK && t->replica_files) rc = write_replica(t, err);
    if (rc || !trainer_in_replica0(t)) return rc;
    bp_resume_state rs = {.step = t->step};
    bp_task_get_state(&t->task, &rs);
    const char *dir = t->res->checkpoint;
    bp_model *model = bp_stage_model(t->stage, 0);
    rc = bp_checkpoint_write_shard(dir, t->grid.p, t->grid.t, model, params, &view, &rs, err);
    /* Every shard is written before the manifest makes the checkpoint visible: the
     * tp ranks of each stage meet, then the stages (of tp rank 0). A rank that failed
     * above ends the whole job (cli/), so none waits here forever. */
    if (rc == BP_OK && t->grid.tp > 1 && (rc = bp_barrier(t->grid.tp_comm)))
        return bp_comm_fail(t->grid.tp_comm, rc, err);
    if (rc == BP_OK && t->grid.pp > 1 && t->grid.t == 0 && (rc = bp_barrier(t->grid.pp_comm)))
        rc = bp_comm_fail(t->grid.pp_comm, rc, err);
    if (rc || t->rank != 0) return rc;
    bp_manifest mf;
    manifest_of(t, &mf);
    if ((rc = bp_manifest_write(dir, &mf, err))) {
        bp_checkpoint_discard_shard(dir, t->grid.p, t->grid.t);
        return rc;
    }
    return bp_checkpoint_commit(t->cfg->out, t->step, t->cfg->keep_checkpoints, err);
}

/* The ranks' agreement on a failure that some of them saw (trainer.h). */
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

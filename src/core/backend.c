/* Choosing a backend by name. */
#include <string.h>

#include "core/backend.h"

const bp_backend *bp_backend_by_name(const char *name, const char *option, bp_err *err) {
    if (strcmp(name, "cpu") == 0) return bp_backend_cpu();
    if (strcmp(name, "check") == 0) return bp_backend_check();
    bp_fail(err, BP_EUSAGE, "%s: no backend called '%s' (cpu, check)", option, name);
    return NULL;
}

bp_status bp_backend_finish(const bp_backend *be, bp_err *err) {
    if (be->host_memory) return BP_OK;
    bp_dev_event *e;
    bp_status rc = be->event_create(be, &e, err);
    if (rc) return rc;
    rc = be->event_record(be, e, NULL, err);
    if (rc == BP_OK) rc = be->event_sync(be, e, err);
    be->event_destroy(be, e);
    return rc;
}

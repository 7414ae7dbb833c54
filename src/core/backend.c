/* Choosing a backend by name. */
#include <string.h>

#include "core/backend.h"

const bp_backend *bp_backend_by_name(const char *name, const char *option, bp_err *err) {
    if (strcmp(name, "cpu") == 0) return bp_backend_cpu();
    if (strcmp(name, "check") == 0) return bp_backend_check();
    bp_fail(err, BP_EUSAGE, "%s: no backend called '%s' (cpu, check)", option, name);
    return NULL;
}

/* Interoperation between bagpipe groups and MPI communicators.
 *
 * For programs that start MPI themselves (with MPI_THREAD_MULTIPLE) or build
 * their own communicators, and for tests. Separate from comm.h so that users of
 * the library need no MPI header. */
#ifndef BAGPIPE_COMM_MPI_H
#define BAGPIPE_COMM_MPI_H

#include <mpi.h>

#include "bagpipe/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over mpi: a group over a duplicate of mpi, with its own emulation
 * and watchdog settings (a new "world" for the groups split from it). MPI must be
 * initialized with MPI_THREAD_MULTIPLE. Free it with bp_comm_destroy. */
bp_status bp_comm_wrap(MPI_Comm mpi, const char *name, bp_comm **out, bp_err *err);

/* The MPI communicator underneath c (do not free it; do not send on it, so that
 * its messages do not meet ours). */
MPI_Comm bp_comm_mpi(const bp_comm *c);

/* MPI_Waitall of req[0..n) (requests on bp_comm_mpi(c)) that sleeps c's poll
 * interval between tests (bp_comm_set_poll), as c's own waits do; an MPI code. */
int bp_comm_mpi_wait(const bp_comm *c, int n, MPI_Request *req);

#ifdef __cplusplus
}
#endif
#endif

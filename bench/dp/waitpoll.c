/* Diagnostic for bench/dp/overlap.py --waitpoll: loaded with LD_PRELOAD into every rank,
 * it replaces MPI_Waitall by a loop of MPI_Testall and 50 us sleeps.
 *
 * Open MPI's MPI_Waitall spins in its progress engine (with mpi_yield_when_idle, a
 * sched_yield per turn) until the peer has matched the message. bagpipe's communication
 * thread waits there for every message of every bucket; on a machine with no spare core
 * the spinning thread takes CPU time from backward on the same rank. With this library
 * the thread sleeps instead, so the difference between the two runs is the cost of the
 * spinning. Build: mpicc -O2 -shared -fPIC -o waitpoll.so waitpoll.c */
#include <mpi.h>
#include <time.h>

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[]) {
    const struct timespec pause = {0, 50000};
    for (;;) {
        int done = 0;
        int rc = PMPI_Testall(count, reqs, &done, statuses);
        if (rc != MPI_SUCCESS || done) return rc;
        nanosleep(&pause, NULL);
    }
}

/* Prints how bagpipe groups this rank by node, as --hierarchical does (node
 * size 0: the ranks that share memory, which Open MPI decides from its launch
 * daemons):
 *   "<world rank> <host name> <ranks on this node> <nodes>"
 * for hierarchical.sh to check against the hosts the ranks ran on. */
#include <mpi.h>
#include <stdio.h>

#include "bagpipe/comm.h"

int main(int argc, char **argv) {
    bp_comm *world = NULL, *local = NULL, *leaders = NULL;
    bp_err err;
    if (bp_comm_init(&argc, &argv, &world, &err) != BP_OK) {
        fprintf(stderr, "node_groups: %s\n", err.msg);
        return 1;
    }
    int rc = bp_comm_split_node(world, 0, &local, &leaders);
    /* Every rank learns the number of nodes from its node's leader. */
    float nodes = leaders ? (float)bp_comm_size(leaders) : 0;
    if (rc == BP_OK) rc = bp_bcast(local, &nodes, 1, 0);
    char host[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(host, &len);
    if (rc == BP_OK)
        printf("%d %s %d %d\n", bp_comm_rank(world), host, bp_comm_size(local), (int)nodes);
    else
        fprintf(stderr, "node_groups: %s\n", bp_comm_errmsg(world));
    bp_comm_destroy(leaders);
    bp_comm_destroy(local);
    bp_comm_finalize(world);
    return rc == BP_OK ? 0 : 1;
}

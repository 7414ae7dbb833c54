"""bagpipe from Python: the world of ranks that MPI started, and bagpipe's
collectives and codecs on float32 buffers (the C library through bagpipe._C).

Run under MPI, one process per rank:  mpirun -np 4 python3 train.py
bagpipe.torch has the DDP communication hooks and the weight algorithms."""
import atexit as _atexit
import os as _os
import sys as _sys

from . import _C
from ._C import Error

#: The watchdog's default, as the CLI's --comm-timeout: an operation that has not
#: finished after this many seconds ends the whole job with one line.
DEFAULT_TIMEOUT = 600.0
#: How often a wait for messages tests for them, sleeping in between, in seconds (the
#: CLI's --comm-poll-us); 0 blocks in MPI, which spins. Spinning takes the core from
#: computation that shares it, but a sleeping wait wakes late on a loaded machine: on
#: 2 shared cores, 50 us made bytegrad's and lp-decentralized's steps no faster
#: (bench/torch_hooks/README.md), so the default stays 0.
DEFAULT_POLL = 0.0


def init(timeout=DEFAULT_TIMEOUT, net=None, poll=DEFAULT_POLL):
    """Start MPI through bagpipe (MPI_Init_thread, MPI_THREAD_MULTIPLE) unless it
    is started; idempotent. timeout: the watchdog in seconds (0: off); net: a
    network emulation spec such as "bw=100Mbit,lat=1ms" (comm.h); poll: the
    interval in seconds of every wait, this thread's and the communication
    threads' made after (0: block in MPI)."""
    if not _C.initialized():
        _C.init()
        _atexit.register(finalize)
        _check_launcher()
        if _C.size() > 1:
            _sys.excepthook = _aborting_hook(_sys.excepthook)
    _C.set_timeout(float(timeout))
    _C.set_poll(float(poll))
    if net is not None:
        _C.set_net(net)


def _check_launcher():
    """A launcher such as torchrun sets WORLD_SIZE and starts each process alone: MPI
    then gives each a world of its own, and they would train alone, silently."""
    want = _os.environ.get("WORLD_SIZE", "")
    if want.isdigit() and int(want) != _C.size():
        raise Error(f"bagpipe: WORLD_SIZE is {want} but MPI started {_C.size()} rank(s): "
                    "bagpipe takes its ranks from MPI; launch with "
                    f"mpirun -np {want} python3 {_sys.argv[0] or 'train.py'}, not torchrun")


def _aborting_hook(print_exception):
    """An exception nobody caught ends the whole job, after its traceback. Without
    this the rank would shut MPI down at exit, which waits for the other ranks, while
    they wait in a collective for this one until the watchdog's timeout (minutes).
    (SystemExit never reaches the hook: sys.exit leaves as a normal exit does.)"""
    def hook(kind, value, tb):
        print_exception(kind, value, tb)
        _sys.stderr.flush()
        _C.abort(1)
    return hook


def finalize():
    """Stop bagpipe's communication threads and shut MPI down (registered with
    atexit by init)."""
    _C.finalize()


def rank():
    return _C.rank()


def size():
    return _C.size()


def barrier():
    _C.barrier()


def abort(code=1):
    """End every rank of the job now with `code` (MPI_Abort)."""
    _C.abort(code)

"""Jobs that must end (faults.sh): a rank that hangs before its bucket's collective
(`hang`), dies in the middle of training (`die`) or raises an exception nobody
catches (`raise`), with DDP and bagpipe's bytegrad hook and a watchdog of 5 s
(60 s for `raise`, which must end the job at once, not through the watchdog).
The watchdog is not 1 s: on a loaded machine a healthy rank can reach a step's
collective a second after its peer, and the job must end only for the fault."""
import os
import signal
import sys
import time

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

import common
import bagpipe.torch as bpt
from bagpipe import _C

mode = sys.argv[1]
bpt.init_process_group(timeout=60 if mode == "raise" else 5)
model = DDP(common.tiny_model())
model.register_comm_hook(bpt.HookState(), bpt.bytegrad_hook)
for step in range(4):
    # After step 1: DDP rebuilds its buckets at the start of step 1 over gloo,
    # a wait that bagpipe does not watch.
    if _C.rank() == 1 and step == 2:
        if mode == "hang":
            time.sleep(120)
        elif mode == "raise":
            raise RuntimeError("rank 1 fails on purpose")
        else:
            os.kill(os.getpid(), signal.SIGKILL)
    x, y = common.batch(_C.rank(), step)
    torch.nn.functional.cross_entropy(model(x), y).backward()
print("finished", flush=True)

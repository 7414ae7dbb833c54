"""The module's buffers kept as DDP's broadcast_buffers keeps them: at the start
of every training forward, every rank's buffers are rank 0's as they are at the
start of rank 0's forward, bit for bit (any dtype: they travel as bytes).

DDP broadcasts them at every forward: a collective, with the bytes, that every
rank enters. BufferSync sends the bytes ahead and waits for no one on rank 0:

  rank 0, end of a training forward    the buffers as the forward left them (what
                                       its next forward starts from unless the
                                       script changes them) are posted to every
                                       rank; the others post their receive
  rank 0, start of a training forward  its buffers are compared, as bytes, with
                                       those it posted; a header (the forward's
                                       count, changed or not, the bytes) is
                                       posted, followed by the buffers when they
                                       changed: written by the script,
                                       reset_running_stats, load_state_dict, a
                                       training forward under no_grad
  other ranks, start of a forward      wait for the header; take the buffers
                                       posted at the end of rank 0's last forward
                                       or, when the header says changed, the ones
                                       after it

so that what the others wait for at a forward's start is a header of 12 bytes,
the buffers having travelled during the step. They do wait for it: only rank 0
knows whether its script changed the buffers after its last forward, and until
it has said so no other rank can know what its forward is to start from; a
forward's start on another rank follows rank 0's, as under DDP. What rank 0
posted is completed at its next forward (the others received it by then or
soon after) and by finish()."""
import torch

from .. import Error, _C
from . import _tensors

HEAD, DATA = 1, 2  # the messages' tags
WHEN_WRAPPED = -1  # the count of the wrap's broadcast: no forward has posted yet


def pack(buffers, out=None):
    """The buffers' bytes, padded to whole floats (the C library sends floats)."""
    raw = [b.detach().contiguous().reshape(-1).view(torch.uint8) for b in buffers]
    n = sum(r.numel() for r in raw)
    if out is None or out.numel() != (n + 3) // 4 * 4:
        out = torch.zeros((n + 3) // 4 * 4, dtype=torch.uint8)
    torch.cat(raw, out=out[:n])
    return out


@torch.no_grad()
def unpack(packed, buffers):
    off = 0
    for b in buffers:
        n = b.numel() * b.element_size()
        b.copy_(packed[off:off + n].view(b.dtype).view(b.shape))
        off += n


def broadcast(buffers):
    """Rank 0's buffers to every rank now (collective): the wrap's."""
    if not buffers or _C.size() == 1:
        return
    packed = pack(buffers)
    _C.bcast(_tensors.buf(packed.view(torch.float32), "buffers"), 0)
    unpack(packed, buffers)


class BufferSync:
    """The buffers of `module` at each training forward's start as rank 0's (the
    protocol above). begin() and end() bracket every training forward, on every
    rank, in the same order; close() completes what is in flight."""

    def __init__(self, module):
        self.module, self.root = module, _C.rank() == 0
        self.fanout = _C.Fanout(0, "bagpipe-buffers")
        self.count = 0           # training forwards begun
        self.posted = None       # rank 0: the bytes posted at the last forward's end
        self.inbox = None        # the others: where they arrive
        self.head = torch.zeros(4)

    def _buffers(self):
        return list(self.module.buffers())

    def begin(self):
        if self.root:
            self._announce()
        else:
            self._receive()
        self.count += 1

    def _announce(self):
        self.fanout.wait()  # what the last forward posted (small messages: sent by now)
        now = pack(self._buffers())
        changed = self.posted is None or not torch.equal(now, self.posted)
        self.head[:3] = torch.tensor([self.count, float(changed), now.numel()])
        self.fanout.send(_tensors.buf(self.head), HEAD)
        if changed:
            self.fanout.send(_tensors.buf(now.view(torch.float32)), DATA)

    def _receive(self):
        bufs = self._buffers()
        size = pack(bufs).numel() if self.inbox is None else self.inbox.numel()
        self.fanout.recv(_tensors.buf(self.head), HEAD)
        self.fanout.wait()  # the header, and the bytes of rank 0's last forward's end
        count, changed, nbytes = (int(v) for v in self.head[:3])
        if count != self.count or nbytes != size:
            raise Error(f"bagpipe: rank {_C.rank()}'s training forward {self.count} "
                        f"({size} bytes of buffers) met rank 0's forward {count} ({nbytes} "
                        "bytes): every rank must run the same training forwards on modules "
                        "whose buffers have the same shapes")
        if changed:
            self.inbox = torch.empty(nbytes, dtype=torch.uint8)
            self.fanout.recv(_tensors.buf(self.inbox.view(torch.float32)), DATA)
            self.fanout.wait()
        unpack(self.inbox, bufs)

    def end(self):
        """After a training forward (also one that raised: every rank posts). Rank 0
        waits here for nothing: what it posted at the forward's start may be
        complete only once the others' forwards start."""
        if self.root:
            self.posted = pack(self._buffers())
            self.fanout.send(_tensors.buf(self.posted.view(torch.float32)), DATA)
        else:
            self.fanout.recv(_tensors.buf(self.inbox.view(torch.float32)), DATA)

    def close(self):
        self.fanout.close()

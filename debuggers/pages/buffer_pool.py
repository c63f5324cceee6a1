"""``BufferPool``: per-batch host buffers that land in memory used before.

A capture copies what the model offers (its later in-place changes must not reach the
page), once per batch. Copied into fresh memory, a batch of attention weights (4 MB)
costs more in page faults (one per 4 KiB, the kernel zeroing each page) than in copying.
The pool keeps a few buffers and hands each out again once nothing uses its previous
content: the page writer has written it and dropped it, and no caller holds a view of
it. That moment is noticed without polling and without a hook in the writer: the pool
hands out a tensor over a NumPy slice of the buffer (the tensor, and every view of it,
keeps the slice alive), and a ``weakref.finalize`` on the slice gives the buffer back
when the slice dies, in whichever thread drops the last reference.

Each buffer is a mapping of its own (``mmap``), outside the C heap that the model's tensors
come from: a few 4 MB blocks taken and let go in that heap change where glibc puts the model's
own temporaries, and its forward pass then took fresh, page-faulting memory for them batch
after batch (about 2,000 more minor faults per batch of the benchmark's attention model).

Nothing waits: when no buffer of the right size is free, the tensor gets fresh memory,
which joins the pool while the pool holds fewer than ``max_buffers`` and ``max_bytes``.
The defaults cover what one debugger's copies need at once: the page writer's queue
(16 MB, or one batch when a batch is larger), the batch it is writing and the batch being
captured; 256 MB is two batches of ViT-B's attention (64 datapoints, 12 heads, 197 tokens:
119 MB a batch). ``release`` lets them all go when capture stops (the epoch is over).

A pool stays usable in a child forked at any moment: its lock is made anew there.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import threading
import weakref

import numpy as np
import torch

DEFAULT_MAX_BUFFERS = 6  # 16 MB of queued 4 MB copies (the one being written among them), the next batch's, a scratch
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
POOLED_FROM_BYTES = 64 * 1024  # smaller tensors come from the allocator's warm heap anyway
_PROT_NONE = 0
_libc = ctypes.CDLL(None, use_errno=True)

_pools: weakref.WeakSet[BufferPool] = weakref.WeakSet()


class BufferPool:
    """Reusable host buffers for tensors made once per batch, at most ``max_buffers`` and ``max_bytes``."""

    def __init__(self, max_buffers: int = DEFAULT_MAX_BUFFERS, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_buffers, self.max_bytes = max_buffers, max_bytes
        self._free: list[np.ndarray] = []
        self._buffers = self._bytes = 0  # the pool's buffers, free or in use, and their size
        self._generation = 0  # bumped by release: buffers handed out before it are not taken back
        self._lock = threading.RLock()  # RLock: a slice may die, and give its buffer back, inside _take
        _pools.add(self)

    @property
    def free_buffers(self) -> int:
        return len(self._free)

    @property
    def kept_bytes(self) -> int:
        """Bytes of the pool's buffers, free or in use."""
        return self._bytes

    def copy_of(self, tensor: torch.Tensor) -> torch.Tensor:
        """A detached, contiguous copy of ``tensor`` (a plain clone off the CPU or for a non-dense tensor)."""
        tensor = tensor.detach()
        if tensor.device.type != "cpu" or tensor.layout != torch.strided or tensor.is_quantized:
            return tensor.clone(memory_format=torch.contiguous_format)
        return self.empty_like(tensor).copy_(tensor)

    def empty_like(self, tensor: torch.Tensor) -> torch.Tensor:
        """An uninitialised contiguous tensor like ``tensor``; on the CPU in a pooled buffer if one is free."""
        nbytes = tensor.numel() * tensor.element_size()
        taken = self._take(nbytes) if nbytes >= POOLED_FROM_BYTES and tensor.device.type == "cpu" else None
        if taken is None:
            return torch.empty(tensor.shape, dtype=tensor.dtype, device=tensor.device)
        buffer, generation = taken
        piece = buffer[:nbytes]
        weakref.finalize(piece, self._give_back, buffer, generation)
        return torch.from_numpy(piece).view(tensor.dtype).view(tensor.shape)

    def release(self) -> None:
        """Let every buffer go: the free ones now, the ones in use when their last view dies."""
        with self._lock:
            self._generation += 1
            self._free.clear()
            self._buffers = self._bytes = 0

    def _take(self, nbytes: int) -> tuple[np.ndarray, int] | None:
        """A free buffer that fits ``nbytes`` without wasting more than half of it, or a new one that joins the
        pool, making room by dropping free buffers of other sizes; None when even that leaves no room."""
        with self._lock:
            for k, buffer in enumerate(self._free):
                if nbytes <= buffer.nbytes <= 2 * nbytes:
                    return self._free.pop(k), self._generation
            in_use_bytes = self._bytes - sum(buffer.nbytes for buffer in self._free)
            if self._buffers - len(self._free) >= self.max_buffers or in_use_bytes + nbytes > self.max_bytes:
                return None
            while not self._has_room(nbytes):  # sizes changed: free buffers that no longer fit go
                self._forget(self._free.pop(0))
            self._buffers, self._bytes = self._buffers + 1, self._bytes + nbytes
            generation = self._generation
        return _mapped(nbytes), generation

    def _has_room(self, nbytes: int) -> bool:
        return self._buffers < self.max_buffers and self._bytes + nbytes <= self.max_bytes

    def _forget(self, buffer: np.ndarray) -> None:
        self._buffers, self._bytes = self._buffers - 1, self._bytes - buffer.nbytes

    def _give_back(self, buffer: np.ndarray, generation: int) -> None:
        with self._lock:
            if generation == self._generation:
                self._free.append(buffer)


def _mapped(nbytes: int) -> np.ndarray:
    """``nbytes`` of fresh anonymous memory, unmapped when the last array over it dies.

    A private mapping, faulted in page by page as the copy fills it: ``mmap``'s default shared one took 3.0 ms
    for a new 4 MB buffer filled by a copy, against 1.7 ms (making its pages at once, ``MAP_POPULATE``, saves
    0.1 ms of that and nothing in the capture: ``python -m benchmarks.debugger_overhead --workloads attention
    new-buffers``). A private mapping made just below another merges with it, so the buffer starts after a page
    that cannot be read or written (``PROT_NONE``), which nothing merges across: the buffer starts a mapping of
    its own, and a 4 KiB block (``O_DIRECT``)."""
    if not hasattr(mmap, "MAP_PRIVATE"):  # Windows
        return np.frombuffer(mmap.mmap(-1, nbytes), dtype=np.uint8)
    memory = np.frombuffer(mmap.mmap(-1, mmap.PAGESIZE + nbytes, flags=mmap.MAP_PRIVATE), dtype=np.uint8)
    _libc.mprotect(ctypes.c_void_p(memory.ctypes.data), ctypes.c_size_t(mmap.PAGESIZE), _PROT_NONE)
    return memory[mmap.PAGESIZE:]


def _new_locks_after_fork() -> None:
    """A lock held at the fork by a thread that does not exist in the child would never be released there."""
    for pool in list(_pools):
        pool._lock = threading.RLock()


os.register_at_fork(after_in_child=_new_locks_after_fork)

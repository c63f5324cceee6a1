"""BufferPool: a buffer comes back only once nothing uses its copy; the pool never waits and stays bounded."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
import torch

from debuggers.pages.buffer_pool import POOLED_FROM_BYTES, BufferPool
from debuggers.pages.reader import DebugOutputs
from debuggers.pages.values import to_page_value
from debuggers.pages.writer import PageWriter
from tests.debuggers.library import exit_code_in_forked_child, held_by_another_thread, wait_until

pytestmark = pytest.mark.timeout(60)
ELEMENTS = POOLED_FROM_BYTES // 4 * 2  # float32 tensors big enough to be pooled


def test_copies_equal_their_source_whatever_the_dtype_and_layout():
    pool = BufferPool()
    torch.manual_seed(0)
    sources = [torch.randn(ELEMENTS // 64, 64).t(),  # not contiguous
               (torch.randn(ELEMENTS) * 10).to(torch.bfloat16), torch.randn(ELEMENTS) > 0,
               torch.randn(ELEMENTS, dtype=torch.complex64).conj(), torch.randint(-9, 9, (ELEMENTS,)),
               torch.randn(3, 4)]  # small: plain memory
    for source in sources:
        copy = pool.copy_of(source)
        assert copy.dtype == source.dtype and copy.shape == source.shape and copy.is_contiguous()
        assert torch.equal(copy, source.resolve_conj())
        assert copy.untyped_storage().data_ptr() != source.untyped_storage().data_ptr()


def test_a_buffer_is_reused_only_when_no_view_of_its_copy_is_left():
    pool = BufferPool()
    source = torch.randn(ELEMENTS)
    copy = pool.copy_of(source)
    address = copy.data_ptr()
    row_view, array_view = copy[10:], copy.numpy()[5:]
    del copy
    others = [pool.copy_of(source)]  # views still use it: another buffer
    del row_view
    others.append(pool.copy_of(source))
    assert address not in {other.data_ptr() for other in others} and pool.free_buffers == 0
    del array_view
    assert pool.free_buffers == 1
    again = pool.copy_of(source * 2)
    assert again.data_ptr() == address
    torch.testing.assert_close(again, source * 2)


def test_a_full_pool_gives_fresh_memory_without_waiting_and_stays_bounded():
    pool = BufferPool(max_buffers=2, max_bytes=4 * ELEMENTS * 4)
    source = torch.randn(ELEMENTS)
    held = [pool.copy_of(source) for _ in range(5)]
    assert len({copy.data_ptr() for copy in held}) == 5
    assert all(torch.equal(copy, source) for copy in held)
    del held
    assert pool.free_buffers == 2
    bigger = pool.copy_of(torch.randn(3 * ELEMENTS))  # over max_bytes with both kept: one makes room
    assert pool.free_buffers == 1
    del bigger
    assert pool.free_buffers == 2  # 1 + 3 ELEMENTS floats: max_bytes


def test_the_page_writer_gives_a_batch_back_once_it_has_written_it(tmp_path):
    """Copies that reuse a buffer never change what an earlier batch's pages hold."""
    pool = BufferPool(max_buffers=2)
    torch.manual_seed(0)
    batches = [torch.randn(4, ELEMENTS // 4) for _ in range(6)]
    addresses = set()
    with PageWriter(1 << 30) as writer:
        writer.start_epoch(str(tmp_path))
        for b, batch in enumerate(batches):
            copy = pool.copy_of(batch)
            addresses.add(copy.data_ptr())
            writer.add_converted([4 * b + i for i in range(4)], [{"x": row} for row in to_page_value(copy)])
            del copy
            wait_until(lambda: pool.free_buffers == 1)  # the writer has written the batch and dropped it
        writer.flush()
    assert len(addresses) == 1 and pool.free_buffers == 1
    pages = DebugOutputs(str(tmp_path))
    for b, batch in enumerate(batches):
        for i in range(4):
            np.testing.assert_array_equal(pages[4 * b + i]["x"], batch[i].numpy())


def test_a_request_over_max_bytes_gets_fresh_memory_and_keeps_the_free_buffers():
    pool = BufferPool(max_buffers=4, max_bytes=4 * ELEMENTS * 4)
    source = torch.randn(ELEMENTS)
    addresses = {pool.copy_of(source).data_ptr() for _ in range(2)}  # each dies at once: one buffer, free
    assert pool.free_buffers == 1
    huge = pool.copy_of(torch.randn(5 * ELEMENTS))  # more than max_bytes: never pooled
    assert pool.free_buffers == 1 and pool.copy_of(source).data_ptr() in addresses
    del huge
    assert pool.free_buffers == 1


def test_free_buffers_are_dropped_only_when_that_makes_room():
    pool = BufferPool(max_buffers=4, max_bytes=4 * ELEMENTS * 4)
    held = pool.copy_of(torch.randn(3 * ELEMENTS))  # in use: 3 of the 4 ELEMENTS floats allowed
    small = torch.randn(ELEMENTS // 2)
    address = pool.copy_of(small).data_ptr()
    assert pool.free_buffers == 1
    pool.copy_of(torch.randn(3 * ELEMENTS // 2))  # dropping the free buffer would not make room: fresh memory
    assert pool.free_buffers == 1 and pool.copy_of(small).data_ptr() == address
    pool.copy_of(torch.randn(ELEMENTS))  # dropping it makes room: it goes, the new size joins
    assert pool.free_buffers == 1 and pool.kept_bytes == 4 * ELEMENTS * 4
    del held


def test_release_lets_every_buffer_go_including_those_in_use():
    pool = BufferPool()
    source = torch.randn(ELEMENTS)
    held = pool.copy_of(source)
    pool.copy_of(source)  # dies at once: free
    assert pool.free_buffers == 1 and pool.kept_bytes == 2 * ELEMENTS * 4
    pool.release()
    assert pool.free_buffers == 0 and pool.kept_bytes == 0
    del held  # handed out before the release: not taken back
    assert pool.free_buffers == 0 and pool.kept_bytes == 0
    pool.copy_of(source)
    assert pool.free_buffers == 1 and pool.kept_bytes == ELEMENTS * 4  # the pool works as before


def _mappings() -> dict[int, int]:
    """Start address -> size of this process's memory mappings."""
    with open("/proc/self/maps") as maps:
        ranges = [line.split()[0].split("-") for line in maps]
    return {int(start, 16): int(end, 16) - int(start, 16) for start, end in ranges}


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads Linux's /proc/self/maps")
def test_buffers_are_mappings_of_their_own_outside_the_c_heap_and_unmapped_when_let_go():
    """Buffers from malloc would move the model's own temporaries in glibc's heap (see the module's docstring):
    each buffer starts a mapping of its own, and the pool's release gives it back to the kernel."""
    pool = BufferPool()
    nbytes = 4 * 1024 * 1024  # one batch of the benchmark's attention weights
    copy = pool.copy_of(torch.randn(nbytes // 4))
    address = copy.data_ptr()
    assert _mappings().get(address, 0) >= nbytes  # malloc's memory starts inside its chunk or its heap
    neighbour = BufferPool().copy_of(torch.randn(nbytes // 4))  # mapped next to it: private mappings would merge
    mappings = _mappings()
    assert mappings.get(address, 0) >= nbytes and mappings.get(neighbour.data_ptr(), 0) >= nbytes
    del copy
    assert pool.free_buffers == 1 and address in _mappings()
    pool.release()
    gc.collect()
    assert address not in _mappings()


def test_a_child_forked_while_another_thread_holds_the_pool_copies_without_waiting():
    pool = BufferPool()
    source = torch.randn(ELEMENTS)
    with held_by_another_thread(pool._lock):  # as a thread giving a buffer back at the moment of the fork
        code = exit_code_in_forked_child(lambda: torch.equal(pool.copy_of(source), source), timeout_s=20)
    assert code == 0, f"the forked child hung or failed (exit code {code})"


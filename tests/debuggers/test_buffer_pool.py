"""BufferPool: a buffer comes back only once nothing uses its copy; the pool never waits and stays bounded."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from debuggers.buffer_pool import POOLED_FROM_BYTES, BufferPool
from debuggers.page_store import PageWriter
from debuggers.page_values import to_page_value
from runners.eval_viewer.backend.initialization import DebugOutputs

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
            deadline = time.monotonic() + 30
            while writer.in_flight_bytes and time.monotonic() < deadline:  # written and dropped by the writer
                time.sleep(0.001)
        writer.flush()
    assert len(addresses) == 1 and pool.free_buffers == 1
    pages = DebugOutputs(str(tmp_path))
    for b, batch in enumerate(batches):
        for i in range(4):
            np.testing.assert_array_equal(pages[4 * b + i]["x"], batch[i].numpy())

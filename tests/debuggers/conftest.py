"""Fixtures shared by the debugger tests."""

from __future__ import annotations

import mmap
import os

import numpy as np
import pytest
import torch

from models import SmallCNN
from tests.debuggers.library import resident_blocks


@pytest.fixture
def model():
    """A small SmallCNN in eval mode (a test module may define its own ``model``)."""
    torch.manual_seed(0)
    return SmallCNN(widths=(4, 4, 8, 8)).eval()


@pytest.fixture
def direct_folder(tmp_path):
    """``tmp_path``, where a file system there keeps O_DIRECT writes out of the page cache (not tmpfs)."""
    probe = str(tmp_path / "probe")
    block = np.frombuffer(mmap.mmap(-1, 4096), np.uint8)
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_DIRECT)
    except (AttributeError, OSError):
        pytest.skip("no O_DIRECT here")
    try:
        os.pwrite(fd, block, 0)
    except OSError:
        pytest.skip("the file system under tmp_path refuses O_DIRECT writes")
    finally:
        os.close(fd)
    if resident_blocks(probe).any():
        pytest.skip("the file system under tmp_path keeps O_DIRECT writes in memory (tmpfs)")
    os.remove(probe)
    return tmp_path

"""Fixtures shared by the debugger tests."""

from __future__ import annotations

import mmap

import pytest
import torch

from debuggers.pages import file_format as page_format
from models import SmallCNN


@pytest.fixture
def model():
    """A small SmallCNN in eval mode (a test module may define its own ``model``)."""
    torch.manual_seed(0)
    return SmallCNN(widths=(4, 4, 8, 8)).eval()


@pytest.fixture
def direct_folder(tmp_path):
    """``tmp_path``, where Lantern writes big captures with O_DIRECT there (ext4, XFS) and pages are 4 KiB."""
    if page_format._file_system(str(tmp_path)) not in page_format.DIRECT_FILE_SYSTEMS or mmap.PAGESIZE != 4096:
        pytest.skip("Lantern writes pages with O_DIRECT only on ext4 and XFS (and these tests count 4 KiB pages)")
    return tmp_path

"""Fixtures shared by the debugger tests."""

from __future__ import annotations

import pytest
import torch

from models import SmallCNN


@pytest.fixture
def model():
    """A small SmallCNN in eval mode (a test module may define its own ``model``)."""
    torch.manual_seed(0)
    return SmallCNN(widths=(4, 4, 8, 8)).eval()

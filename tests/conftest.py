"""Shared fixtures."""

from __future__ import annotations

import pytest

from tests.runs import write_config


@pytest.fixture
def tiny_config(tmp_path):
    """Factory: ``tiny_config(name, **options) -> config file path`` with its own work dir."""
    def make(name="run", **options):
        return write_config(tmp_path / f"{name}.py", tmp_path / name, **options)
    return make

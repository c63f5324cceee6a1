"""Measurements against DESIGN.md's targets; run each script directly, never part of the tests."""

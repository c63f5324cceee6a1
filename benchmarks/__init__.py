"""Measurements against Lantern's targets (docs/benchmarks.md); run each script directly, never part of the tests."""

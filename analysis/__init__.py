"""Dataset-level analysis of a run: the per-epoch table of every datapoint and why the failing ones fail."""

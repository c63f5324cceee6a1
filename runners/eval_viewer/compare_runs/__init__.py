"""The Compare runs tab: two epochs (of two runs, or of one) joined by idx, and one datapoint in both."""

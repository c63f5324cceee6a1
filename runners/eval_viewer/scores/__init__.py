"""The score chart (the metric over epochs) and the score grid (one cell per datapoint)."""

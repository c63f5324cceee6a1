"""The Training tab: what the run's training monitor recorded, followed while the run trains."""

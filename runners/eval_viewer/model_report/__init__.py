"""The Model report tab: figures of the run's ``model_report.json``."""

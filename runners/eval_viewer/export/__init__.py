"""The HTML export of chosen datapoints (``python -m runners.eval_viewer.export``) and the viewer's Export
button."""

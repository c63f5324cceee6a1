"""Dash components for one datapoint."""

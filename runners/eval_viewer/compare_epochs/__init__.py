"""The Compare epochs tab: one datapoint's Debug Outputs at several epochs, as aligned rows."""

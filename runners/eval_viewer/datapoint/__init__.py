"""The Datapoint tab: the open datapoint's inputs, labels, meta info and Debug Outputs."""

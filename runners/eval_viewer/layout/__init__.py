"""The viewer's page: controls, score views and the datapoint panel."""

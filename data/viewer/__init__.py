"""How datapoints are drawn in the eval viewer."""

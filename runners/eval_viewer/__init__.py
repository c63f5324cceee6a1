"""The eval viewer: a Dash app to browse runs, epochs, failing datapoints and their debug outputs."""

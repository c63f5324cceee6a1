"""The Failures tab: why the chosen epoch's datapoints fail, each finding narrowing the table, and its
verification by intervention."""

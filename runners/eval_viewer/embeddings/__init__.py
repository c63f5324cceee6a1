"""The Embeddings tab: a 2-D map of a feature space of the epoch (a captured layer's features, the debuggers'
summaries, the predicted probabilities), stored once per epoch and drawn by WebGL, coloured by any column, tag or
finding; a box or lasso narrows the table, a click opens a datapoint, and "More like this" lists its nearest
neighbours in the space."""

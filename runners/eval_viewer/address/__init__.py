"""The whole view in the address bar, and named views of a run saved under a name."""

"""The Runs tab: several runs side by side (TensorBoard's and W&B's run overlays): their training and validation
curves overlaid, and a sortable table of their config differences and final scores; a click opens a run."""

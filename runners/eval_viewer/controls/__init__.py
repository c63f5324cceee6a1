"""The run, epoch and metric pickers, the epoch's badges, and the page's refresh as runs grow on disk."""

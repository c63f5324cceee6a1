"""The datapoint table: its rows served a block at a time, typed filters, chips, column chooser, and the open
datapoint (a clicked row, ``j`` / ``k``)."""

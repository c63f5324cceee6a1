"""Tags: names given to datapoints (the open one, or the table's filtered rows) from the keyboard or buttons, kept in
the run folder, shown and filtered as the table's ``tags`` column, and read by the analysis as meta columns."""

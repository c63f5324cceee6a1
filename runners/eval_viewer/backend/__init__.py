"""Reading runs from disk: scores, progress, debug pages. Nothing here runs code from a log folder."""

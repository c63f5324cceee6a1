"""The seed's place of the display functions of one datapoint (``display/``)."""

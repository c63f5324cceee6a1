"""Figures of debug outputs, registered once by output kind (``registry``): the Datapoint tab, the comparisons
and the HTML export all draw through it. Also how a figure or a value is put on the page (pictures, tables as
text, graphs drawn in view) and over an input image (overlays)."""

"""The Export button (beside the previous / next buttons) and the download it gives."""

from __future__ import annotations

from dash import dcc, html

from runners.eval_viewer.export.ids import EXPORT_BUTTON, EXPORT_DOWNLOAD


def export_button() -> list:
    """The button, and the download the browser saves the report from."""
    return [html.Button("Export filtered rows as HTML", id=EXPORT_BUTTON, className="small-button",
                        title="a self-contained HTML report of the table's filtered datapoints, in its order, "
                              "saying which filters and sort chose them"),
            dcc.Download(id=EXPORT_DOWNLOAD)]

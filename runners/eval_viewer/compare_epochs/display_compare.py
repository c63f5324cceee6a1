"""Debug Outputs of one datapoint in several columns (epochs or runs), as aligned rows.

Each debugger gets its rows (``figures/compare.py``): the same channels in every
column, one colour scale and the same axes per row, and a last column with the difference
of the last and the first column. Figures are drawn as the Datapoint tab draws them (``drawn_figure``): maps as
pictures, tables as text, graphs when they come into view. A column without the output says why in its first row.
Rows of a state the same for every datapoint (a position encoding) are folded and marked
"shared": they are the same whichever datapoint is open, though they may change from epoch
to epoch (hence still compared).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from dash import html

from runners.eval_viewer.datapoint.display_datapoint import debug_body
from runners.eval_viewer.datapoint.display_debug_outputs import drawn_figure, output_note, shared_title
from runners.eval_viewer.datapoint.display_labels import class_badges
from runners.eval_viewer.figures.base import SHARED, is_picture, is_shared
from runners.eval_viewer.figures.compare import compare_figures
from runners.eval_viewer.figures.context import NO_CONTEXT, DrawContext
from runners.eval_viewer.shared.components import message, score_badges
from runners.eval_viewer.shared.elements import card


@dataclass
class CompareColumn:
    """One column: its title and badges, and its debug outputs or the note that replaces them; ``context``
    is what its figures are drawn with (``DrawContext.of`` the column's datapoint)."""

    title: str
    badges: list[Any] = field(default_factory=list)
    debug: Optional[dict[str, Any]] = None
    note: Optional[Any] = None
    context: DrawContext = NO_CONTEXT


def display_compare(columns: list[CompareColumn]) -> html.Div:
    """A heading row, then per debugger its name and its rows of figures across the columns."""
    width = f"{100 / (len(columns) + (len(columns) > 1)):.2f}%"
    headings = [_cell([html.H5(column.title), html.Div(column.badges, className="badges")], width, "compare-column")
                for column in columns]
    if len(columns) > 1:
        headings.append(_cell([html.H5("difference"), html.Small(f"{columns[-1].title} − {columns[0].title}")],
                              width, "compare-difference"))
    blocks = [html.Div(headings, className="compare-row compare-headings")]
    names = list(dict.fromkeys(name for column in columns for name in (column.debug or {})))
    for name in names:
        blocks.append(card(html.Strong(name), _debugger_rows(name, columns, width), "debugger-block"))
    notes = [column.note for column in columns if column.note is not None]
    if not names and notes:
        blocks.append(html.Div([_cell([note], width) for note in notes], className="compare-row"))
    return html.Div(blocks, className="compare-debug-outputs")


def _debugger_rows(name: str, columns: list[CompareColumn], width: str) -> list[Any]:
    """The debugger's rows of figures; rows of a state the same for every datapoint (a position encoding)
    folded under one "shared" summary at the end, as the Datapoint tab folds them."""
    outputs = [(column.debug or {}).get(name) for column in columns]
    rows = compare_figures(outputs, [column.context for column in columns])
    notes = [column.note if column.debug is None else output_note(name, output)
             for column, output in zip(columns, outputs)]
    if not rows:
        rows = [[None] * len(columns)]
    drawn, shared, titles = [], [], []
    for number, row in enumerate(rows):
        cells = []
        for i, fig in enumerate(row):
            if fig is not None:
                cells.append(_cell([drawn_figure(fig, "compare-figure")], width))
            elif number == 0 and i < len(notes) and notes[i] is not None:
                cells.append(_cell([notes[i]], width))
            else:
                cells.append(_cell([], width))
        compared = [fig for fig in row[:len(columns)] if fig is not None]
        # pictures of a row have one size: aligned at their bottom, titles of different lengths keep them level
        kind = "compare-row compare-figure-row" + (" compare-picture-row" if all(map(is_picture, compared)) else "")
        if compared and all(is_shared(fig) for fig in compared):
            shared.append(html.Div(cells, className=kind))
            titles.append(shared_title(compared[0]))
        else:
            drawn.append(html.Div(cells, className=kind))
    if shared:
        drawn.append(html.Details([html.Summary(f"{SHARED} (in each column): {', '.join(dict.fromkeys(titles))}",
                                                className="shared-summary"), *shared], className="shared-outputs"))
    return drawn


def _cell(children: list, width: str, kind: str = "compare-cell") -> html.Div:
    """A cell of a row; headings of the compared columns are ``compare-column``, the rest ``compare-cell``."""
    return html.Div(children, className=kind, style={"width": width})


def compare_column(datapoint: dict, title: str) -> CompareColumn:
    """A column of the comparison: badges, and the debug outputs or why there are none."""
    badges = [*class_badges(datapoint), *score_badges(datapoint["scores"])]
    if datapoint.get("missing"):
        return CompareColumn(title, badges, note=message(datapoint["missing"], "secondary"))
    if datapoint["debug"] is None:
        return CompareColumn(title, badges, note=message(f"{title} has no debug outputs: only its scores are shown",
                                                         "secondary"))
    if datapoint.get("debug_error") or datapoint.get("debug_note"):
        return CompareColumn(title, badges, note=debug_body(datapoint))
    return CompareColumn(title, badges, debug=datapoint["debug"], context=DrawContext.of(datapoint))

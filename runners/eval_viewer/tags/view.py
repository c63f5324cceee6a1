"""The tag bar under the previous / next buttons: the run's tags as chips (a chip toggles its tag on the open
datapoint; keys 1-9 too, the chip's number), a box to name a tag (key ``t``; Enter gives it to the open datapoint),
and buttons giving it to, or taking it from, every datapoint the table's filters show."""

from __future__ import annotations

from typing import Optional

from dash import dcc, html

from run_dir.tags_file import MAX_NAME, TagsFileError
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.tags.data import run_tags
from runners.eval_viewer.tags.ids import (
    TAG_BAR,
    TAG_CHIP,
    TAG_CHIPS,
    TAG_NAME,
    TAG_NAMES,
    TAG_NOTE,
    TAG_OPEN,
    TAG_ROWS,
    TAGS_CHANGED,
    UNTAG_ROWS,
)

KEYED = 9  # chips with a number key


def tag_bar(backend: ViewerBackend, first: FirstView) -> html.Div:
    """The bar as the first page shows it: the chips of the run it opens on, marked for the datapoint it opens."""
    chips, names, problem = tag_chips(first.run, first.idx)
    return html.Div([
        html.Span("Tags", className="tag-title"),
        html.Div(chips, id=TAG_CHIPS, className="tag-chips"),
        html.Span(dcc.Input(id=TAG_NAME, placeholder="tag (t)", maxLength=MAX_NAME, list=TAG_NAMES,
                            className="tag-name", debounce=False, autoComplete="off"), **{"data-key": "t"}),
        html.Datalist(names, id=TAG_NAMES),
        html.Button(open_label(first.idx), id=TAG_OPEN, className="small-button",
                    title="give the tag typed to the open datapoint (Enter in the box)"),
        html.Button("Tag filtered rows", id=TAG_ROWS, className="small-button",
                    title="give the tag typed to every datapoint the table's filters show"),
        html.Button("Untag filtered rows", id=UNTAG_ROWS, className="small-button",
                    title="take the tag typed from every datapoint the table's filters show"),
        html.Span(problem, id=TAG_NOTE, className="hint", role="status"),
        dcc.Store(id=TAGS_CHANGED),
    ], id=TAG_BAR, className="tag-bar")


def tag_chips(run_path: Optional[str], idx: Optional[int]) -> tuple[list, list, str]:
    """The run's tags as chips (those ``idx`` carries marked), as the box's suggestions, and why there are none
    when its tags file cannot be used."""
    try:
        tags = run_tags(run_path)
    except TagsFileError as exc:
        return [], [], str(exc)
    carried = set(tags.of(idx)) if idx is not None else set()
    chips = [html.Button(f"{place + 1}·{name}" if place < KEYED else name,
                         id={"type": TAG_CHIP, "index": name},
                         className="tag-chip" + (" carried" if name in carried else ""),
                         title=f"{len(tagged)} datapoints; toggle '{name}' on the open datapoint"
                               + (f" (key {place + 1})" if place < KEYED else ""),
                         **({"data-key": str(place + 1)} if place < KEYED else {}))
             for place, (name, tagged) in enumerate(tags.tags.items())]
    return chips, [html.Option(value=name) for name in tags.tags], ""


def open_label(idx: Optional[int]) -> str:
    return "Tag open datapoint" if idx is None else f"Tag datapoint {idx}"

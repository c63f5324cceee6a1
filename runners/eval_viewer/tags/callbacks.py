"""The tag bar's callbacks: a tag given to (or taken from) the open datapoint or the table's filtered rows, written
to the run's tags file (``run_dir/tags_file.py``: locked, so viewers tagging one run at once lose nothing), then the
chips drawn again and the table's rows asked again (their ``tags`` cells, and a filter on them, follow)."""

from __future__ import annotations

from typing import Any, Optional

from dash import ALL, Dash, Input, Output, State, ctx, no_update

from run_dir.tags_file import TagsFileError, change_tags
from runners.eval_viewer.controls.ids import RUN_SELECT
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, datapoint_idx, paging
from runners.eval_viewer.shared.feature import Feature
from runners.eval_viewer.shared.ids import SELECTED
from runners.eval_viewer.shared.table import TABLE_ERRORS
from runners.eval_viewer.table.data import table_of, table_where
from runners.eval_viewer.table.ids import TABLE, TABLE_QUERY
from runners.eval_viewer.tags.data import run_tags
from runners.eval_viewer.tags.ids import (
    SENDS,
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
from runners.eval_viewer.tags.view import open_label, tag_chips

_REFRESH_ROWS = """function(changed) {
    // The tags changed: the table asks for its rows again (their tags cells, and a filter on tags, follow).
    try { dash_ag_grid.getApi('TABLE').refreshInfiniteCache(); } catch (error) { }
    return window.dash_clientside.no_update;
}""".replace("TABLE", TABLE)


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(TAG_CHIPS, "children"), Output(TAG_NAMES, "children"), Output(TAG_OPEN, "children"),
                  Output(TAG_NOTE, "children", allow_duplicate=True), Input(RUN_SELECT, "value"),
                  Input(SELECTED, "data"), Input(TAGS_CHANGED, "data"), prevent_initial_call=True)
    def draw_chips(run_path: Optional[str], selected: Any, _: Optional[dict]) -> tuple:
        try:
            idx = datapoint_idx(selected)
        except BadRequest as exc:
            return no_update, no_update, no_update, str(exc)
        chips, names, problem = tag_chips(run_path, idx)
        return chips, names, open_label(idx), problem or no_update

    @app.callback(Output(TAGS_CHANGED, "data"), Output(TAG_NOTE, "children"), Output(TAG_NAME, "value"),
                  Input(TAG_OPEN, "n_clicks"), Input(TAG_NAME, "n_submit"), Input(TAG_ROWS, "n_clicks"),
                  Input(UNTAG_ROWS, "n_clicks"), Input({"type": TAG_CHIP, "index": ALL}, "n_clicks"),
                  State(TAG_NAME, "value"), State(SELECTED, "data"), State(TABLE_QUERY, "data"),
                  State(TABLE, "getRowsRequest"), prevent_initial_call=True)
    def tag(_: Any, __: Any, ___: Any, ____: Any, _____: list, name: Optional[str], selected: Any,
            query: Optional[dict], request: Optional[dict]) -> tuple:
        trigger = ctx.triggered_id
        if not ctx.triggered or not ctx.triggered[0].get("value"):
            return no_update, no_update, no_update  # chips drawn, not clicked
        query = query or {}
        run_path = query.get("run")
        try:
            if isinstance(trigger, dict):  # a chip: its tag toggled on the open datapoint
                note = toggle(run_path, str(trigger.get("index")), datapoint_idx(selected))
            elif trigger in (TAG_ROWS, UNTAG_ROWS):
                note = tag_rows(backend, query, request, name, add=trigger == TAG_ROWS)
            else:
                note = tag_open(run_path, name, datapoint_idx(selected))
        except (TagsFileError, BadRequest, *TABLE_ERRORS) as exc:
            return no_update, f"not tagged: {exc}", no_update
        return {"run": run_path, "version": run_tags(run_path).version}, note, "" if isinstance(trigger, str) \
            else no_update

    app.clientside_callback(_REFRESH_ROWS, Output(TAGS_CHANGED, "id"), Input(TAGS_CHANGED, "data"),
                            prevent_initial_call=True)
    app.clientside_callback(  # Enter gave the tag: the keys are the page's again (j, k, a chip's number)
        """function(submitted) {
            if (submitted && document.activeElement) { document.activeElement.blur(); }
            return window.dash_clientside.no_update;
        }""", Output(TAG_NAME, "id"), Input(TAG_NAME, "n_submit"), prevent_initial_call=True)


def tag_open(run_path: Optional[str], name: Optional[str], idx: Optional[int]) -> str:
    if idx is None or not run_path:
        raise BadRequest("open a datapoint first (click a row), then tag it")
    change_tags(run_path, name, [idx])
    return f"datapoint {idx} tagged '{(name or '').strip()}'"


def toggle(run_path: Optional[str], name: str, idx: Optional[int]) -> str:
    if idx is None or not run_path:
        raise BadRequest(f"open a datapoint first (click a row), then click '{name}' to tag it")
    carried = name in run_tags(run_path).of(idx)
    change_tags(run_path, name, [idx], add=not carried)
    return f"datapoint {idx} {'untagged' if carried else 'tagged'} '{name}'"


def tag_rows(backend: ViewerBackend, query: dict, request: Optional[dict], name: Optional[str], add: bool) -> str:
    """Give ``name`` to (or take it from) every datapoint the table's filters show."""
    epoch, table = table_of(backend, query.get("run"), query.get("epoch"))
    if table is None:
        raise BadRequest("choose a run and an epoch first")
    where = table_where(backend, epoch, table, query, paging(request or {}).filter_model)
    idx = table.values(["idx"], where=where)["idx"].tolist()
    change_tags(query["run"], name, idx, add=add)
    return f"{len(idx)} datapoints {'tagged' if add else 'untagged'} '{(name or '').strip()}'"


FEATURE = Feature(register, SENDS)

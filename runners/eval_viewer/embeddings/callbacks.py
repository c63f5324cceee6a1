"""The Embeddings tab's callbacks: the map drawn while the tab is shown (and followed while it is computed), the open
datapoint and its neighbours marked on it (a patch of two small traces: the points are not sent again), a box or
lasso narrowing the table (the browser sends only its corners, rounded outwards, as an address holds them), a click
opening a datapoint, and More like this."""

from __future__ import annotations

from typing import Any, Optional

from dash import ALL, Dash, Input, Output, Patch, State, ctx, no_update

from runners.eval_viewer.controls.ids import EPOCH_SELECT, RUN_SELECT
from runners.eval_viewer.datapoint.ids import TAB_DATAPOINT
from runners.eval_viewer.embeddings.data import (
    MAP_ERRORS,
    MAP_JOBS,
    MAX_VERTICES,
    PREFIX,
    SelectionError,
    chosen_space,
    neighbours,
    selection_narrowing,
    shape_key,
)
from runners.eval_viewer.embeddings.figures import mark_points
from runners.eval_viewer.embeddings.ids import (
    EMBEDDING_COLOUR,
    EMBEDDING_MAP,
    EMBEDDING_MORE,
    EMBEDDING_NEAR,
    EMBEDDING_NEIGHBOUR,
    EMBEDDING_NEIGHBOURS,
    EMBEDDING_NOTE,
    EMBEDDING_OPEN,
    EMBEDDING_OPEN_IDX,
    EMBEDDING_POLL,
    EMBEDDING_SELECTION,
    EMBEDDING_SELECTION_NOTE,
    EMBEDDING_SHOW_DATAPOINT,
    EMBEDDING_SHOWN,
    EMBEDDING_SPACE,
    SENDS,
    TAB_EMBEDDINGS,
)
from runners.eval_viewer.embeddings.view import NEIGHBOURS, embeddings_tab, map_content, neighbour_list, open_datapoint
from runners.eval_viewer.shared import opened
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, datapoint_idx
from runners.eval_viewer.shared.feature import Feature, Tab
from runners.eval_viewer.shared.ids import SELECTED, SELECTED_ROW, TABS
from runners.eval_viewer.shared.pending import while_shown_script
from runners.eval_viewer.shared.table import TABLE_ERRORS
from runners.eval_viewer.table.ids import TABLE_IDX_FILTER
from runners.eval_viewer.tags.ids import TAGS_CHANGED

# A box or lasso drawn: its corners (6 significant digits, a box rounded outwards so it holds what was drawn), never
# the selected points (50,000 of them would be megabytes): the server finds them on the stored map.
_SELECT = """function(selected, shown) {
    const none = window.dash_clientside.no_update;
    if (!shown) { return none; }
    const digits = (v, direction) => {
        if (!isFinite(v) || v === 0) { return 0; }
        const step = Math.pow(10, Math.floor(Math.log10(Math.abs(v))) - 5);
        const rounded = direction > 0 ? Math.ceil(v / step) * step : direction < 0 ? Math.floor(v / step) * step
                                                                                  : Math.round(v / step) * step;
        return Number(rounded.toPrecision(6));
    };
    let shape = '';
    if (selected && selected.range && selected.range.x && selected.range.y) {
        const [x0, x1] = selected.range.x.slice().sort((a, b) => a - b);
        const [y0, y1] = selected.range.y.slice().sort((a, b) => a - b);
        shape = `box:${digits(x0, -1)},${digits(x1, 1)},${digits(y0, -1)},${digits(y1, 1)}`;
    } else if (selected && selected.lassoPoints && selected.lassoPoints.x) {
        const xs = selected.lassoPoints.x, ys = selected.lassoPoints.y;
        const step = Math.max(1, Math.ceil(xs.length / MAX_VERTICES));
        const points = [];
        for (let i = 0; i < xs.length; i += step) { points.push(`${digits(xs[i], 0)} ${digits(ys[i], 0)}`); }
        shape = points.length >= 3 ? 'lasso:' + points.join(';') : '';
    }
    return {run: shown.run, epoch: shown.epoch, space: shown.space, shape: shape};
}""".replace("MAX_VERTICES", str(MAX_VERTICES))

_OPEN_POINT = """function(click, _neighbours) {
    // A point of the map, or a listed neighbour, clicked: its datapoint opens (the map stays).
    const none = window.dash_clientside.no_update;
    const trigger = (window.dash_clientside.callback_context.triggered || []).find((t) => t.value);
    if (!trigger) { return [none, none]; }
    if (trigger.prop_id.startsWith('MAP.')) {
        // the point's idx from the drawn trace: the click's own customdata is lost where it came as a typed array
        const point = ((click || {}).points || [])[0] || {};
        const graph = document.querySelector('#MAP .js-plotly-plot');
        const trace = graph && graph._fullData ? graph._fullData[point.curveNumber] : null;
        const idx = trace && trace.customdata ? Number(trace.customdata[point.pointNumber]) : NaN;
        return Number.isInteger(idx) && idx >= 0 ? [idx, null] : [none, none];
    }
    return [JSON.parse(trigger.prop_id.slice(0, trigger.prop_id.lastIndexOf('.'))).idx, null];
}""".replace("MAP", EMBEDDING_MAP)


def register(app: Dash, backend: ViewerBackend) -> None:
    @app.callback(Output(EMBEDDING_MAP, "figure"), Output(EMBEDDING_NOTE, "children"),
                  Output(EMBEDDING_POLL, "disabled"), Output(EMBEDDING_SPACE, "options"),
                  Output(EMBEDDING_SPACE, "value"), Output(EMBEDDING_COLOUR, "options"),
                  Output(EMBEDDING_COLOUR, "value"), Output(EMBEDDING_SHOWN, "data"),
                  Output(EMBEDDING_OPEN, "children"), Output(EMBEDDING_NEIGHBOURS, "children"),
                  Output(EMBEDDING_NEAR, "data"),
                  Input(TABS, "value"), Input(RUN_SELECT, "value"), Input(EPOCH_SELECT, "value"),
                  Input(EMBEDDING_SPACE, "value"), Input(EMBEDDING_COLOUR, "value"),
                  Input(EMBEDDING_POLL, "n_intervals"), Input(TAGS_CHANGED, "data"),
                  State(SELECTED, "data"), State(TABLE_IDX_FILTER, "data"), State(EMBEDDING_SHOWN, "data"),
                  State(EMBEDDING_NEAR, "data"), prevent_initial_call=True)  # a first page on it comes drawn
    def draw_map(tab: Optional[str], run_path: Optional[str], epoch_key: Optional[str], space: Optional[str],
                 colour: Optional[str], _: Any, __: Any, selected: Any, narrowed: Optional[dict],
                 shown: Optional[dict], near: Optional[dict]) -> tuple:
        if tab != TAB_EMBEDDINGS:
            return (no_update,) * 11
        idx = _open_idx(selected)
        same_map = bool(shown) and (shown.get("run"), shown.get("epoch"), shown.get("space")) == (
            run_path, epoch_key, space)
        listed = (near or {}).get("idx") if same_map else None
        content = map_content(backend, run_path, epoch_key, space, colour, idx, narrowed, listed)
        if content.computing and ctx.triggered_id == EMBEDDING_POLL:  # still computing: the note says for how long
            return no_update, content.note, *(no_update,) * 9
        kept = same_map and content.space == space
        return (content.figure, content.note, not content.computing, content.spaces, content.space, content.colours,
                content.colour, content.shown, open_datapoint(backend, run_path, epoch_key, idx),
                no_update if kept else [], no_update if kept else None)

    # The open idx passed on only while the tab is shown: a datapoint opened on another tab (``j``) sends nothing
    # here (showing the tab draws the map with it marked).
    opened.follow(app, while_shown_script(TAB_EMBEDDINGS), (EMBEDDING_OPEN_IDX, "data"))

    @app.callback(Output(EMBEDDING_MAP, "figure", allow_duplicate=True), Output(EMBEDDING_OPEN, "children",
                                                                               allow_duplicate=True),
                  Input(EMBEDDING_OPEN_IDX, "data"), Input(EMBEDDING_NEAR, "data"), State(SELECTED, "data"),
                  State(TABS, "value"), State(EMBEDDING_SHOWN, "data"), prevent_initial_call=True)
    def mark(_: Any, near: Optional[dict], selected: Any, tab: Optional[str], shown: Optional[dict]) -> tuple:
        """The open datapoint (a star) and the neighbours listed (rings) marked on the map drawn."""
        found = _shown_map(backend, shown) if tab == TAB_EMBEDDINGS else None
        if found is None:
            return no_update, no_update
        idx = _open_idx(selected)
        patched = Patch()
        for offset, chosen in enumerate(((near or {}).get("idx") or [], [] if idx is None else [idx])):
            points = mark_points(found, chosen)
            trace = patched["data"][shown["marks"] + offset]
            trace["x"], trace["y"] = [p[0] for p in points], [p[1] for p in points]
            trace["customdata"] = [p[2] for p in points]
        return patched, open_datapoint(backend, shown["run"], shown["epoch"], idx)

    @app.callback(Output(EMBEDDING_NEIGHBOURS, "children", allow_duplicate=True),
                  Output(EMBEDDING_NEAR, "data", allow_duplicate=True), Input(EMBEDDING_MORE, "n_clicks"),
                  State(SELECTED, "data"), State(EMBEDDING_SHOWN, "data"), prevent_initial_call=True)
    def more_like_this(clicks: Optional[int], selected: Any, shown: Optional[dict]) -> tuple:
        idx = _open_idx(selected)
        found = _shown_map(backend, shown)
        if not clicks or idx is None or found is None:
            return no_update, no_update
        try:
            near, distances = neighbours(found, idx, NEIGHBOURS)
        except SelectionError as exc:
            return [str(exc)], None
        label = found.about.get("label", shown["space"])
        return (neighbour_list(backend, shown["run"], shown["epoch"], idx, label, near, distances),
                {"of": idx, "idx": near})

    app.clientside_callback(_SELECT, Output(EMBEDDING_SELECTION, "data"), Input(EMBEDDING_MAP, "selectedData"),
                            State(EMBEDDING_SHOWN, "data"), prevent_initial_call=True)

    @app.callback(Output(TABLE_IDX_FILTER, "data", allow_duplicate=True),
                  Output(EMBEDDING_SELECTION_NOTE, "children"), Input(EMBEDDING_SELECTION, "data"),
                  State(TABLE_IDX_FILTER, "data"), prevent_initial_call=True)
    def narrow(selection: Optional[dict], narrowed: Optional[dict]) -> tuple:
        """A box or lasso narrows the table to the datapoints in it; none drawn (a double click) ends that."""
        selection = selection or {}
        if not selection.get("shape"):
            ours = str((narrowed or {}).get("finding") or "").startswith(PREFIX)
            return (None, "") if ours else (no_update, "")
        try:
            found = selection_narrowing(backend, selection.get("run"), selection.get("epoch"),
                                        shape_key(str(selection.get("space")), selection["shape"]))
        except SelectionError as exc:
            return no_update, f"The table is not narrowed: {exc}"
        if found is None:
            return no_update, no_update
        kind = selection["shape"].partition(":")[0]
        return found, (f"The table shows the {len(found['idx'])} datapoints in the {kind}; double-click the map (or "
                       "Clear filters) to show all.")

    app.clientside_callback(_OPEN_POINT, Output(SELECTED, "data", allow_duplicate=True),
                            Output(SELECTED_ROW, "data", allow_duplicate=True), Input(EMBEDDING_MAP, "clickData"),
                            Input({"type": EMBEDDING_NEIGHBOUR, "idx": ALL}, "n_clicks"), prevent_initial_call=True)
    app.clientside_callback(
        f"""function(clicks) {{ return clicks ? '{TAB_DATAPOINT}' : window.dash_clientside.no_update; }}""",
        Output(TABS, "value", allow_duplicate=True), Input(EMBEDDING_SHOW_DATAPOINT, "n_clicks"),
        prevent_initial_call=True)


def _open_idx(selected: Any) -> Optional[int]:
    try:
        return datapoint_idx(selected)
    except BadRequest:
        return None


def _shown_map(backend: ViewerBackend, shown: Optional[dict]) -> Any:
    """The stored map the tab shows (``EMBEDDING_SHOWN``), None when none is."""
    if not shown or not isinstance(shown.get("marks"), int):
        return None
    run = backend.run(shown.get("run"))
    epoch = backend.epoch(run, shown.get("epoch")) if run else None
    if epoch is None:
        return None
    try:
        _, space = chosen_space(backend, epoch, shown.get("space"))
        if space is None or space.key != shown.get("space"):
            return None
        return MAP_JOBS.map_of(epoch.dir, space, backend.embedding_method, compute=False).found
    except (*TABLE_ERRORS, *MAP_ERRORS):
        return None


FEATURE = Feature(register, SENDS, Tab(TAB_EMBEDDINGS, embeddings_tab))

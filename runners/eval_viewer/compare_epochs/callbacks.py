"""Comparisons: one datapoint across epochs of a run, and across two runs, side by side.

Each column opens only the page holding the datapoint in its epoch; nothing is
computed while the tab is hidden: the open datapoint reaches a comparison through a store
that the browser writes only while that tab is shown, so a click on another tab sends no
request for it. The first page comes with the pickers filled (``layout/panels.py``), so
opening it runs none of these callbacks.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
from dash import Dash, Input, Output, State, html, no_update

from runners.datapoint_capture import ITEM_KEYS
from runners.eval_viewer.compare_epochs.display_compare import CompareColumn, display_compare
from runners.eval_viewer.datapoint.display_datapoint import debug_body, display_summary, section
from runners.eval_viewer.datapoint.display_debug_outputs import figure_context
from runners.eval_viewer.datapoint.display_inputs import display_inputs
from runners.eval_viewer.datapoint.display_labels import class_badges
from runners.eval_viewer.shared import ids
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import BadRequest, datapoint_idx, storable
from runners.eval_viewer.shared.components import default_epoch, epoch_option, message, score_badges
from runners.eval_viewer.shared.datapoint import load_datapoint, load_item
from runners.eval_viewer.shared.runs import Epoch, Run

MAX_DEFAULT_EPOCHS = 4  # preselected columns; more can be added by hand
_WHILE_SHOWN = """function(idx, tab) {
    return tab === 'TAB' ? {idx: idx === undefined ? null : idx} : window.dash_clientside.no_update;
}"""


def epoch_columns(backend: ViewerBackend, run: Run, epochs: list[Epoch], idx: int) -> html.Div:
    """The datapoint's title (which one ``j``/``k`` reached), its inputs once, then its Debug Outputs at each of
    ``epochs`` as aligned rows."""
    item = load_item(backend, run, idx)
    columns = [_compare_column({**load_datapoint(backend, run, epoch, idx, with_item=False), **item}, epoch.label)
               for epoch in epochs]
    inputs = display_inputs(item["inputs"]) if item.get("inputs") else message(item["dataset_error"], "warning")
    title = html.H5(f"datapoint {idx} · {run.name}", className="datapoint-title")
    return html.Div([title, section("Inputs", inputs), section("Debug Outputs", display_compare(columns))])


def run_columns(backend: ViewerBackend, sides: list[tuple[Run, Epoch]], idx: int) -> html.Div:
    """The datapoint ``idx`` in each (run, epoch): its inputs, labels and meta info once (again for a side whose
    captured datapoint differs: another validation set), then each side's badges and Debug Outputs as aligned
    rows."""
    datapoints = [load_datapoint(backend, run, epoch, idx) for run, epoch in sides]
    columns = [_compare_column(datapoint, f"{run.name} · {epoch.label}")
               for (run, epoch), datapoint in zip(sides, datapoints)]
    present = [(side, datapoint) for side, datapoint in zip(sides, datapoints) if not datapoint.get("missing")]
    shown = [(side, datapoint) for i, (side, datapoint) in enumerate(present)
             if i == 0 or not same_item(datapoint, present[0][1])]
    title = html.H5(f"datapoint {idx} · " + " and ".join(f"{run.name} · {epoch.label}" for run, epoch in sides),
                    className="datapoint-title")
    summaries = [html.Div([html.H6(f"as {run.name} captured it"), display_summary(datapoint)])
                 if len(shown) > 1 else display_summary(datapoint) for (run, _), datapoint in shown]
    missing = [message(datapoint["missing"], "secondary") for datapoint in datapoints if datapoint.get("missing")]
    return html.Div([title, *missing, *summaries, section("Debug Outputs", display_compare(columns))])


def same_item(first: dict, second: dict) -> bool:
    """Whether two sides captured the same inputs, labels and meta info (the same validation set)."""
    return all(_same(first.get(part), second.get(part)) for part in ITEM_KEYS)


def _same(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b, equal_nan=a.dtype.kind
                                                                                              in "fc")
    return type(a) is type(b) and a == b


def _compare_column(datapoint: dict, title: str) -> CompareColumn:
    """A column of the comparison: badges, and the debug outputs or why there are none."""
    badges = [*class_badges(datapoint), *score_badges(datapoint["scores"])]
    if datapoint.get("missing"):
        return CompareColumn(title, badges, note=message(datapoint["missing"], "secondary"))
    if datapoint["debug"] is None:
        return CompareColumn(title, badges, note=message(f"{title} has no debug outputs: only its scores are shown",
                                                         "secondary"))
    if datapoint.get("debug_error") or datapoint.get("debug_note"):
        return CompareColumn(title, badges, note=debug_body(datapoint))
    return CompareColumn(title, badges, debug=datapoint["debug"], context=figure_context(datapoint))


def register(app: Dash, backend: ViewerBackend) -> None:
    for tab, shown in ((ids.TAB_COMPARE_EPOCHS, ids.COMPARE_EPOCHS_SHOWN),
                       (ids.TAB_COMPARE_RUNS, ids.COMPARE_RUNS_SHOWN)):
        app.clientside_callback(_WHILE_SHOWN.replace("TAB", tab), Output(shown, "data"), Input(ids.SELECTED, "data"),
                                Input(ids.TABS, "value"))

    @app.callback(Output(ids.COMPARE_EPOCHS_SELECT, "options"), Output(ids.COMPARE_EPOCHS_SELECT, "value"),
                  Input(ids.EPOCH_SELECT, "options"), Input(ids.EPOCH_SELECT, "value"),
                  State(ids.RUN_SELECT, "value"), prevent_initial_call=True)
    def choose_epochs(_: list, epoch_key: Optional[str], run_path: Optional[str]) -> tuple:
        return epochs_to_compare(backend, run_path, epoch_key)

    @app.callback(Output(ids.COMPARE_EPOCHS_PANEL, "children"), Output(ids.COMPARE_EPOCHS_DRAWN, "data"),
                  Output(ids.COMPARE_EPOCHS_STATUS, "children"),
                  Input(ids.COMPARE_EPOCHS_SHOWN, "data"), Input(ids.COMPARE_EPOCHS_SELECT, "value"),
                  State(ids.TABS, "value"), State(ids.RUN_SELECT, "value"), State(ids.COMPARE_EPOCHS_DRAWN, "data"),
                  prevent_initial_call=True)
    def compare_epochs(shown: Optional[dict], keys: Optional[list], tab: str, run_path: Optional[str],
                       drawn: Optional[list]) -> tuple:
        """Drawn while the tab is shown, once per datapoint, run and epochs (what it shows: ``drawn``, and a status
        line saying "loading" until then, see callbacks/pending.py)."""
        shown = shown if isinstance(shown, dict) else None
        wanted = storable([None if shown is None else shown.get("idx"), run_path, keys])
        if tab != ids.TAB_COMPARE_EPOCHS or shown is None or wanted == drawn:
            return no_update, no_update, no_update
        run = backend.run(run_path)
        epochs = [e for e in backend.epochs(run) if e.key in (keys or [])] if run else []
        try:
            idx = datapoint_idx(shown.get("idx"))
        except BadRequest as exc:
            return message(str(exc), "warning"), wanted, ""
        if idx is None or not epochs:
            return message("Click a datapoint and pick the epochs to compare."), wanted, ""
        return epoch_columns(backend, run, epochs, idx), wanted, ""

    @app.callback(Output(ids.COMPARE_RUN_SELECT, "options"), Input(ids.RUN_SELECT, "options"),
                  Input(ids.RUN_SELECT, "value"), prevent_initial_call=True)
    def other_runs(options: list, run_path: Optional[str]) -> list:
        return other_run_options(options, run_path)

    @app.callback(Output(ids.COMPARE_RUN_EPOCH_SELECT, "options"), Output(ids.COMPARE_RUN_EPOCH_SELECT, "value"),
                  Input(ids.COMPARE_RUN_SELECT, "value"), State(ids.EPOCH_SELECT, "value"),
                  State(ids.RUN_SELECT, "value"), prevent_initial_call=True)
    def choose_other_epoch(other_path: Optional[str], epoch_key: Optional[str], run_path: Optional[str]) -> tuple:
        return other_run_epochs(backend, other_path, epoch_key, epoch_key, run_path)

    @app.callback(Output(ids.COMPARE_RUNS_PANEL, "children"), Output(ids.COMPARE_RUNS_DRAWN, "data"),
                  Output(ids.COMPARE_RUNS_STATUS, "children"),
                  Input(ids.COMPARE_RUNS_SHOWN, "data"),
                  Input(ids.RUN_SELECT, "value"), Input(ids.EPOCH_SELECT, "value"),
                  Input(ids.COMPARE_RUN_SELECT, "value"), Input(ids.COMPARE_RUN_EPOCH_SELECT, "value"),
                  State(ids.TABS, "value"), State(ids.COMPARE_RUNS_DRAWN, "data"), prevent_initial_call=True)
    def compare_runs(shown: Optional[dict], run_path: Optional[str], epoch_key: Optional[str],
                     other_path: Optional[str], other_key: Optional[str], tab: str, drawn: Optional[list]) -> tuple:
        shown = shown if isinstance(shown, dict) else None
        wanted = storable([None if shown is None else shown.get("idx"), run_path, epoch_key, other_path, other_key])
        if tab != ids.TAB_COMPARE_RUNS or shown is None or wanted == drawn:
            return no_update, no_update, no_update
        sides = [_side(backend, run_path, epoch_key), _side(backend, other_path, other_key)]
        try:
            idx = datapoint_idx(shown.get("idx"))
        except BadRequest as exc:
            return message(str(exc), "warning"), wanted, ""
        if idx is None or None in sides:
            return message("Click a datapoint, then pick a second run and its epoch."), wanted, ""
        return run_columns(backend, sides, idx), wanted, ""


def other_run_epochs(backend: ViewerBackend, other_path: Optional[str], wanted: Optional[str],
                     epoch_key: Optional[str], run_path: Optional[str]) -> tuple[list, Any]:
    """The second run's epochs as options, and the one chosen: ``wanted`` (an address's, else the open epoch) where
    the run has it, else its default; the run itself compared with another of its epochs gets, unless ``wanted``
    names one, the epoch before the open ``epoch_key`` (the one after for its first epoch)."""
    other = backend.run(other_path)
    epochs = backend.epochs(other) if other else []
    keys = [e.key for e in epochs]
    same_run = other_path == run_path
    if wanted in keys and not (same_run and wanted == epoch_key):
        chosen = wanted
    elif same_run and epoch_key in keys and len(keys) > 1:
        at = keys.index(epoch_key)
        chosen = keys[at - 1] if at > 0 else keys[1]
    else:
        chosen = default_epoch(epochs)
    return [epoch_option(e) for e in epochs], chosen


def epochs_to_compare(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str],
                      chosen: Optional[list[str]] = None) -> tuple[list, list]:
    """The run's epochs as options, and those preselected: ``chosen`` (an address's) where the run has them, else
    the last ``MAX_DEFAULT_EPOCHS`` with debug outputs and the chosen one."""
    run = backend.run(run_path)
    epochs = backend.epochs(run) if run else []
    order = [e.key for e in epochs]
    if chosen and set(chosen) <= set(order):
        return [epoch_option(e) for e in epochs], sorted(set(chosen), key=order.index)
    keys = [e.key for e in epochs if e.has_debug][-MAX_DEFAULT_EPOCHS:]
    if epoch_key in order and epoch_key not in keys:  # an epoch the run lacks (sent before a run switch) is left out
        keys = [*keys[1 - MAX_DEFAULT_EPOCHS:], epoch_key]
    return [epoch_option(e) for e in epochs], sorted(keys, key=order.index)


def other_run_options(options: Optional[list], run_path: Optional[str]) -> list:
    """The runs to compare the chosen one with: every run, the chosen one first (another of its epochs)."""
    own = [{**option, "label": f"this run: {option['label']}"} for option in options or []
           if option["value"] == run_path]
    return own + [option for option in options or [] if option["value"] != run_path]


def _side(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str]) -> Optional[tuple[Run, Epoch]]:
    run = backend.run(run_path)
    epoch = backend.epoch(run, epoch_key) if run else None
    return (run, epoch) if epoch else None

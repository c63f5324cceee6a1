"""The Compare epochs tab: the open datapoint's inputs once, then its Debug Outputs at each chosen epoch as aligned
rows (``display_compare``). Each column opens only the page holding the datapoint in its epoch."""

from __future__ import annotations

from typing import Optional

from dash import dcc, html

from runners.eval_viewer.compare_epochs.display_compare import compare_column, display_compare
from runners.eval_viewer.compare_epochs.ids import (
    COMPARE_EPOCHS_DRAWN,
    COMPARE_EPOCHS_NOTE,
    COMPARE_EPOCHS_PANEL,
    COMPARE_EPOCHS_SELECT,
    COMPARE_EPOCHS_SHOWN,
    COMPARE_EPOCHS_STATUS,
    TAB_COMPARE_EPOCHS,
)
from runners.eval_viewer.controls.data import epoch_option
from runners.eval_viewer.datapoint.display_datapoint import section
from runners.eval_viewer.datapoint.display_inputs import display_inputs
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.components import NOTHING_OPEN, message, tab_of
from runners.eval_viewer.shared.datapoint import load_datapoint, load_item
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.shared.pending import pending_status
from runners.eval_viewer.shared.runs import Epoch, Run

MAX_DEFAULT_EPOCHS = 4  # preselected columns; more can be added by hand


def epoch_columns(backend: ViewerBackend, run: Run, epochs: list[Epoch], idx: int) -> html.Div:
    """The datapoint's title (which one ``j``/``k`` reached), its inputs once, then its Debug Outputs at each of
    ``epochs`` as aligned rows."""
    item = load_item(backend, run, idx)
    columns = [compare_column({**load_datapoint(backend, run, epoch, idx, with_item=False), **item}, epoch.label)
               for epoch in epochs]
    inputs = display_inputs(item["inputs"]) if item.get("inputs") else message(item["dataset_error"], "warning")
    title = html.H5(f"datapoint {idx} · {run.name}", className="datapoint-title")
    return html.Div([title, section("Inputs", inputs), section("Debug Outputs", display_compare(columns))])


def epochs_to_compare(backend: ViewerBackend, run_path: Optional[str], epoch_key: Optional[str],
                      chosen: Optional[list[str]] = None) -> tuple[list, list, str]:
    """The run's epochs as options, those preselected and the note on which kept debug outputs. Preselected:
    ``chosen`` (an address's) where the run has them, else the last ``MAX_DEFAULT_EPOCHS`` with debug outputs and
    the chosen one; where that is one epoch (a run that keeps the last epoch's outputs), the epoch before it too,
    whose scores then stand beside it."""
    run = backend.run(run_path)
    epochs = backend.epochs(run) if run else []
    order = [e.key for e in epochs]
    options, note = [epoch_option(e) for e in epochs], debug_epochs_note(epochs)
    if chosen and set(chosen) <= set(order):
        return options, sorted(set(chosen), key=order.index), note
    keys = [e.key for e in epochs if e.has_debug][-MAX_DEFAULT_EPOCHS:]
    if epoch_key in order and epoch_key not in keys:  # an epoch the run lacks (sent before a run switch) is left out
        keys = [*keys[1 - MAX_DEFAULT_EPOCHS:], epoch_key]
    if len(keys) == 1 and len(order) > 1:
        at = order.index(keys[0])
        keys.append(order[at - 1] if at > 0 else order[1])
    return options, sorted(keys, key=order.index), note


def debug_epochs_note(epochs: list[Epoch]) -> str:
    """Which of the run's epochs kept debug outputs, where some did not (else nothing to say): a column of another
    epoch shows only its scores, and the difference is drawn only between columns that have outputs."""
    kept = [e.label for e in epochs if e.has_debug]
    if len(kept) == len(epochs):
        return ""
    rule = "a run keeps them at its checkpoint epochs (config['checkpoint_method'])"
    if not kept:
        return f"No epoch of this run kept debug outputs ({rule}): the columns show scores only."
    which = f"Only {kept[0]}" if len(kept) == 1 else f"Only {', '.join(kept[:-1])} and {kept[-1]}"
    return f"{which} kept debug outputs ({rule}); the other {len(epochs) - len(kept)} epochs show their scores only."


def compare_epochs_tab(backend: ViewerBackend, first: FirstView) -> dcc.Tab:
    """The tab as the first page shows it: its picker filled (an address's epochs, else the defaults), the panel
    drawn once the tab is shown."""
    options, compared, note = epochs_to_compare(backend, first.run, first.epoch, first.compare.get("epochs"))
    return tab_of("Compare epochs", TAB_COMPARE_EPOCHS, [
        html.Label("Epochs side by side (those with debug outputs are preselected)"),
        dcc.Dropdown(id=COMPARE_EPOCHS_SELECT, options=options, value=compared, multi=True),
        html.P(note, id=COMPARE_EPOCHS_NOTE, className="hint"),
        dcc.Store(id=COMPARE_EPOCHS_SHOWN),
        *pending_status(COMPARE_EPOCHS_STATUS, COMPARE_EPOCHS_DRAWN, first.idx),
        html.Div(NOTHING_OPEN, id=COMPARE_EPOCHS_PANEL, className="compare-panel"),
    ])

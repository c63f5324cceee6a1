"""The Training tab: what the run's training monitor recorded (``config['training_monitor']``, see
docs/training_monitor.md): the loss and learning rate over steps, per-layer gradient norms and update ratios
over steps, weight and gradient histograms per epoch, the first non-finite step and the layers whose gradients
do not update. It follows a run still training (``callbacks/training.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from dash import dcc, html

from data.viewer.layout.display.elements import alert
from data.viewer.layout.display.training_figures import state_colour, states_table
from data.viewer.layout.display.values import GRAPH_CONFIG
from run_dir.training_log import TrainingLog
from runners.eval_viewer.layout.ids import TAB_TRAINING

SUMMARY = "training-summary"  # what was recorded, the first non-finite step, gradients not updating
FIGURES = "training-figures"  # the graphs, hidden while there is nothing to draw
LOSS_CHART = "training-loss"
GRAD_CHART = "training-grad-norms"
UPDATE_CHART = "training-update-ratios"
LAYER_SELECT = "training-layer"
HISTOGRAM_CHART = "training-histograms"
SHOWN = "training-shown"  # {run, version, layer} of what the tab draws: a refresh that changes none redraws nothing
TICK = "training-tick"  # the page's refresh ticks while this tab is shown (none reach the server from other tabs)
NONFINITE_NOTE = "training-nonfinite"
STATES_TABLE = "training-grad-states"
NO_RUN = "Choose a run to see how its training went."


@dataclass
class TrainingContent:
    """Everything the tab shows for one run (``callbacks.training.training_content``)."""

    summary: list[Any]
    figures: dict[str, dict] = field(default_factory=dict)  # chart id -> figure
    layers: list[dict] = field(default_factory=list)  # the layer picker's options
    layer: Optional[int] = None
    shown: Optional[dict] = None

    @property
    def style(self) -> dict:
        """Clipped to nothing rather than hidden: a graph drawn under ``display: none`` has no size to draw at,
        and keeps none once shown."""
        return {} if self.figures else {"height": 0, "overflow": "hidden"}


def training_tab(content: Optional[TrainingContent] = None) -> dcc.Tab:
    """The tab, drawn with ``content`` when the first page opens on it."""
    content = content or TrainingContent([html.P(NO_RUN, className="hint")])

    def graph(chart: str) -> dcc.Graph:
        return dcc.Graph(id=chart, figure=content.figures.get(chart, {}), config=GRAPH_CONFIG)

    return dcc.Tab(label="Training", value=TAB_TRAINING, id=TAB_TRAINING, children=html.Div([
        html.Div(content.summary, id=SUMMARY),
        html.Div([
            graph(LOSS_CHART), graph(GRAD_CHART), graph(UPDATE_CHART),
            html.Div([html.Label("Layer (histograms per epoch)"),
                      dcc.Dropdown(id=LAYER_SELECT, options=content.layers, value=content.layer, clearable=False)],
                     className="control", style={"width": "60%"}),
            graph(HISTOGRAM_CHART),
        ], id=FIGURES, style=content.style),
        dcc.Store(id=SHOWN, data=content.shown),
        dcc.Store(id=TICK),
    ], className="tab-body"))


def summary_view(log: TrainingLog, name: str) -> list[Any]:
    """What the monitor recorded, its problems reading the file, the first non-finite step and the layers whose
    gradient did not update."""
    every = log.settings.get("every_n_steps")
    last = f", the last at step {int(log.loss_steps[-1])}" if log.loss_steps.size else ""
    parts: list[Any] = [html.P(
        f"{name}: {log.loss_steps.size} training steps{last}; {log.steps.size} rows of per-layer norms"
        f"{f' (every {every} steps)' if every else ''}; histograms of {len(log.histograms)} epoch(s). "
        "Follows the run while it trains.", className="hint")]
    parts += [alert(problem, "warning", "training-problem") for problem in log.problems]
    for event in log.events[:1]:
        parts.append(html.Div(alert([html.B(f"First non-finite step: {event.step} (epoch {event.epoch}, "
                                            f"{event.action}). "), html.Span(event.message)], "danger"),
                              id=NONFINITE_NOTE))
    rows = states_table(log)
    if rows:
        parts.append(html.Div([
            html.H4("Gradients not updating (zero, missing or frozen at a monitored step)"),
            html.Table([html.Tr([html.Th(h) for h in ("layer", "state", "since step", "monitored steps")])] + [
                html.Tr([html.Td(layer), html.Td(state, style={"color": state_colour(state), "fontWeight": "bold"}),
                         html.Td(str(first)), html.Td(str(count))]) for layer, state, first, count in rows],
                id=STATES_TABLE, className="training-states")]))
    return parts

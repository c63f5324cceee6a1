"""The Training tab: what the run's training monitor recorded (``config['training_monitor']``, see
docs/training_monitor.md): the loss and learning rate over steps, per-layer gradient norms and update ratios
over steps, weight and gradient histograms per epoch, the first non-finite step and the layers whose gradients
do not update; and the steps ``config['profiler']`` recorded (``training/profile.py``). It follows a run still
training (``training/callbacks.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from dash import dcc, html

from run_dir.errors import RunFileError
from run_dir.names import MONITOR_FILE
from run_dir.training_log import TrainingLog
from runners.eval_viewer.figures.values import GRAPH_CONFIG
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.components import message
from runners.eval_viewer.shared.elements import alert
from runners.eval_viewer.shared.first_view import FirstView
from runners.eval_viewer.training.data import TRAINING_LOGS, tab_version
from runners.eval_viewer.training.figures import histogram_figure, loss_figure, norm_heatmap, state_colour, states_table
from runners.eval_viewer.training.ids import (
    TAB_TRAINING,
    TRAINING_FIGURES,
    TRAINING_GRAD_CHART,
    TRAINING_HISTOGRAM_CHART,
    TRAINING_LAYER_SELECT,
    TRAINING_LOSS_CHART,
    TRAINING_NONFINITE_NOTE,
    TRAINING_SHOWN,
    TRAINING_STATES_TABLE,
    TRAINING_SUMMARY,
    TRAINING_TICK,
    TRAINING_UPDATE_CHART,
)
from runners.eval_viewer.training.profile import profile_view

NO_RUN = "Choose a run to see how its training went."


@dataclass
class TrainingContent:
    """Everything the tab shows for one run (``training_content``)."""

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


def training_tab(backend: ViewerBackend, first: FirstView) -> dcc.Tab:
    """The tab, drawn (``training_content``) when it is the tab the first page opens on."""
    content = training_content(backend, first.run, None) if first.tab == TAB_TRAINING else \
        TrainingContent([html.P(NO_RUN, className="hint")])

    def graph(chart: str) -> dcc.Graph:
        return dcc.Graph(id=chart, figure=content.figures.get(chart, {}), config=GRAPH_CONFIG)

    return dcc.Tab(label="Training", value=TAB_TRAINING, id=TAB_TRAINING, children=html.Div([
        html.Div(content.summary, id=TRAINING_SUMMARY),
        html.Div([
            graph(TRAINING_LOSS_CHART), graph(TRAINING_GRAD_CHART), graph(TRAINING_UPDATE_CHART),
            html.Div([html.Label("Layer (histograms per epoch)"),
                      dcc.Dropdown(id=TRAINING_LAYER_SELECT, options=content.layers, value=content.layer,
                                   clearable=False)],
                     className="control", style={"width": "60%"}),
            graph(TRAINING_HISTOGRAM_CHART),
        ], id=TRAINING_FIGURES, style=content.style),
        dcc.Store(id=TRAINING_SHOWN, data=content.shown),
        dcc.Store(id=TRAINING_TICK),
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
                              id=TRAINING_NONFINITE_NOTE))
    rows = states_table(log)
    if rows:
        parts.append(html.Div([
            html.H4("Gradients not updating (zero, missing or frozen at a monitored step)"),
            html.Table([html.Tr([html.Th(h) for h in ("layer", "state", "since step", "monitored steps")])] + [
                html.Tr([html.Td(layer), html.Td(state, style={"color": state_colour(state), "fontWeight": "bold"}),
                         html.Td(str(first)), html.Td(str(count))]) for layer, state, first, count in rows],
                id=TRAINING_STATES_TABLE, className="training-states")]))
    return parts


NO_FILE = (f"{{run}} has no {MONITOR_FILE}: its config did not ask for the training monitor. Add "
           "'training_monitor': True to a trainer's config to record the loss, learning rate, per-layer gradient "
           "norms and NaN/Inf checks while it trains (docs/training_monitor.md).")


def training_content(backend: ViewerBackend, run_path: Optional[str], layer: Optional[int]) -> TrainingContent:
    """What the tab shows for a run: a message when there is nothing to draw, else the summary and the figures."""
    run = backend.run(run_path)
    if run is None:
        return TrainingContent([html.P(NO_RUN, className="hint")])
    shown = {"run": run.path, "version": tab_version(run), "layer": layer}
    profile = profile_view(run)
    if TRAINING_LOGS.version(run) is None:
        return TrainingContent([message(NO_FILE.format(run=run.name), "secondary"), *profile], shown=shown)
    try:
        log = TRAINING_LOGS.read(run)
    except (OSError, RunFileError) as exc:
        return TrainingContent([message(f"{MONITOR_FILE} of {run.name} cannot be read: {exc}", "danger"),
                                *profile], shown=shown)
    if not log.layers:
        return TrainingContent([message(f"{run.name}'s {MONITOR_FILE} holds no rows yet.", "secondary"), *profile],
                               shown=shown)
    chosen = layer if isinstance(layer, int) and 0 <= layer < len(log.layers) else 0
    figures = {TRAINING_LOSS_CHART: loss_figure(log), TRAINING_GRAD_CHART: norm_heatmap(log, "grad_norm"),
               TRAINING_UPDATE_CHART: norm_heatmap(log, "update_ratio"),
               TRAINING_HISTOGRAM_CHART: histogram_figure(log, chosen)}
    options = [{"label": f"{name} ({kind})", "value": i} for i, (name, kind) in enumerate(zip(log.layers,
                                                                                           log.layer_types))]
    return TrainingContent([*summary_view(log, run.name), *profile], {k: f.to_dict() for k, f in figures.items()},
                           options, chosen, {**shown, "layer": chosen})

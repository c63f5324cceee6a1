"""The Debug Outputs section: one block per debugger, its output drawn through the figure registry
(``figures/registry.py``).

A debugger that raised on the datapoint's batch left an error record: it is shown
as an error (type and message, traceback folded), so a failing debugger is as
visible as a working one. A layer that did not run left a not-run note.
"""

from __future__ import annotations

from typing import Any, Optional

import plotly.graph_objects as go
from dash import html

from debuggers.outputs import KIND_ERROR, KIND_NOT_RUN
from runners.eval_viewer.figures.attention import attention_across_layers_figures
from runners.eval_viewer.figures.base import SHARED, is_picture, is_shared
from runners.eval_viewer.figures.components import lazy_graph, picture_component, table_component
from runners.eval_viewer.figures.context import NO_CONTEXT, DrawContext
from runners.eval_viewer.figures.registry import output_figures
from runners.eval_viewer.figures.values import is_table, value_summary
from runners.eval_viewer.shared.elements import alert, card


def display_debug_outputs(debug: dict[str, Any], context: DrawContext = NO_CONTEXT) -> html.Div:
    """One card per debugger; ``context`` is what figures are drawn with (``DrawContext.of`` a datapoint: the input
    image under overlays such as Grad-CAM, class names in titles, tokens on attention axes)."""
    if not debug:
        return html.Div(alert("No debug outputs were saved for this datapoint at this epoch (the epoch's "
                              "debug pages were written only in part).", color="warning"))
    blocks = [_debugger_block(name, output, context) for name, output in debug.items()]
    across = attention_across_layers_figures(debug)
    if across:  # several attention layers: how attention changes from layer to layer, at a glance
        blocks.insert(0, card(html.Strong("attention across layers"),
                              [drawn_figure(figure, "debug-figure") for figure in across], "debugger-block"))
    return html.Div(blocks, className="debug-outputs")


def _debugger_block(name: str, output: Any, context: DrawContext) -> html.Div:
    return card(html.Strong(name), _output_body(name, output, context), "debugger-block")


def _output_body(name: str, output: Any, context: DrawContext) -> list:
    note = output_note(name, output)
    if note is not None:
        return [note]
    try:
        figures = output_figures(output, context)
    except Exception as exc:  # drawing code must not take the whole datapoint down
        return [alert(f"Could not draw the output of '{name}': {type(exc).__name__}: {exc}. "
                      "The output is kept on disk; report this with the debugger's output format.",
                      color="warning")]
    if not figures:
        return [html.Pre(_summary(output), className="output-summary")]
    own = [drawn_figure(figure, "debug-figure") for figure in figures if not is_shared(figure)]
    shared = [figure for figure in figures if is_shared(figure)]
    if shared:  # the same at every datapoint: folded, so it does not repeat itself datapoint after datapoint
        titles = ", ".join(dict.fromkeys(shared_title(figure) for figure in shared))  # a state drawn thrice, named once
        own.append(html.Details([html.Summary(f"{SHARED}: {titles}", className="shared-summary"),
                                 *[drawn_figure(figure, "debug-figure") for figure in shared]],
                                className="shared-outputs"))
    return own


def drawn_figure(figure: go.Figure, class_name: str) -> Any:
    """A table as text and a picture of maps as an image (nothing for plotly to draw on a click), any other
    figure as a graph drawn when it comes into view; the Datapoint tab and the comparisons draw alike."""
    if is_picture(figure):
        return picture_component(figure, class_name)
    if is_table(figure):
        return table_component(figure, class_name)
    return lazy_graph(figure, class_name)


def shared_title(figure: Any) -> str:
    """The state a shared figure draws (``pos_embed.position_encoding``), from its title."""
    return str(figure.layout.title.text).split(" · ")[0].split(":")[0]


def output_note(name: str, output: Any) -> Optional[html.Div]:
    """What replaces the figures of an error record, a not-run record or a missing output; None otherwise."""
    kind = output.get("kind") if isinstance(output, dict) else None
    if kind == KIND_ERROR:
        return _error_alert(output)
    if kind == KIND_NOT_RUN:
        return alert(f"Not run: {output.get('message', '')}", color="secondary", class_name="not-run-note")
    if output is None:
        return alert(f"no output of '{name}' here", color="light", class_name="not-run-note")
    return None


def _error_alert(record: dict) -> html.Div:
    return alert([
        html.Strong(f"{record.get('type', 'Error')}: "), html.Span(record.get("message", "")),
        html.Details([html.Summary("traceback"), html.Pre(record.get("traceback", ""))]),
    ], color="danger", class_name="debugger-error")


def _summary(output: Any) -> str:
    if isinstance(output, dict):
        return "\n".join(f"{key}: {value_summary(value)}" for key, value in output.items())
    return value_summary(output)

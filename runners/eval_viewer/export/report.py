"""A self-contained HTML report of chosen datapoints: their scores, labels, predictions and debug outputs.

    python -m runners.eval_viewer.export --run logs/examples/cnn_trainer --idx 3 7 12 --out report.html

``--run`` is a trainer work dir (the latest epoch with debug outputs is used
unless ``--epoch`` says otherwise) or an evaluator work dir. The viewer's Export button
writes the same report for the table's filtered rows, in its order, and the report says which filters and sort
chose them. Pages are read as the viewer reads them; a page or index that cannot be read is an alert in the
report. The input images drawn under Grad-CAM maps are the ones the run captured, as the
viewer shows them; the config file the run names is imported to rebuild
missing ones only with ``--trust-configs``. Without images there is no overlay.
A state the same for every datapoint (a position encoding) is drawn once, in its own section.

Figures are drawn as the Datapoint tab draws them, so a report of hundreds of datapoints opens in seconds: maps
(feature maps, Grad-CAM, patch attention) as images, tables as text, and only the charts (bars, histograms,
attention heads) as plotly graphs, each drawn when it is scrolled into view. plotly.js is embedded once (the
viewer's own bundle of the traces it draws), so the file opens offline.
"""

from __future__ import annotations

import base64
import html
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Union

import numpy as np
import plotly.graph_objects as go

from debuggers.outputs import KIND_ERROR, KIND_NOT_RUN
from debuggers.pages.file_format import CorruptPageError, UnsafePageError
from run_dir import RunDir
from run_dir.names import DEBUGGER_DIR, MODEL_REPORT_FILE
from run_dir.tags_file import TagsFileError
from runners.eval_viewer.figures.attention import attention_across_layers_figures
from runners.eval_viewer.figures.base import SHARED, is_picture, is_shared
from runners.eval_viewer.figures.context import NO_CONTEXT, Calibration, DrawContext
from runners.eval_viewer.figures.masks import calibration_figure
from runners.eval_viewer.figures.overlays import picture_png
from runners.eval_viewer.figures.pictures import picture_svg
from runners.eval_viewer.figures.registry import output_figures
from runners.eval_viewer.figures.values import first_image, is_table, prompt_points, table_text, value_summary
from runners.eval_viewer.model_report.figures import model_report_figures
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.datapoint import load_item
from runners.eval_viewer.shared.debug import EpochDebug, EpochDebugError, open_epoch_debug
from runners.eval_viewer.shared.plotly_bundle import plotly_js
from runners.eval_viewer.shared.runs import read_model_report
from runners.eval_viewer.shared.table import HIDDEN_COLUMNS, TABLE_ERRORS, class_text
from runners.eval_viewer.tags.data import TAGS_COLUMN, RunTags, run_tags
from utils.atomic_files import atomic_write
from utils.errors import LanternUserError


class Note(str):
    """Context shown as plain text (an ordinary ``str`` item is an alert)."""


class Records(list):
    """A table: a list of ``{column: value}`` dicts, drawn as an HTML table (numbers to 4 digits)."""


@dataclass(frozen=True)
class Picture:
    """An image (an ``<img>`` source: a data URI) under its caption."""

    source: str
    caption: str


@dataclass(frozen=True)
class Selection:
    """How the report's datapoints were chosen (the table's filters and sort, or ``--idx``): said at the top of the
    report, and kept in it as JSON (``<script id="lantern-selection">``) for whoever rebuilds the view."""

    description: str
    record: dict[str, Any] = field(default_factory=dict)


SHARED_SECTION = f"States {SHARED}"  # drawn once in a report, not once per datapoint
Item = Union[go.Figure, Note, Records, Picture, str]  # a figure, a note, a table, a picture, or the text of an alert
Section = tuple[str, list[Item]]
INPUT_PX = 160  # the input image beside a datapoint's row
_STYLE = """body{font-family:sans-serif;margin:24px;max-width:1200px}
h2{border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:40px}
.alert{background:#fff3cd;border:1px solid #ffe69c;padding:8px 12px;margin:8px 0;white-space:pre-wrap}
.note{color:#555}
.selection{background:#eef4ff;border:1px solid #c9dafb;padding:8px 12px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left}th{background:#f1f3f5}
figure{margin:8px 0 16px}figcaption{font-size:14px;color:#2a3f5f;margin:4px 0}
figure img{max-width:100%;height:auto}figure img.input{width:160px;image-rendering:pixelated}
pre.figure-table{font-size:12px;max-height:640px;overflow:auto}"""
# Draws each chart when it is scrolled into view (its figure is the JSON in the script inside it): a report of
# hundreds of datapoints opens at once and draws only what is looked at, as the viewer does (lazy_graphs.js).
_DRAW_IN_VIEW = """<script>(function () {
  var config = {displaylogo: false, responsive: true};
  var inView = new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (!entry.isIntersecting) { return; }
      inView.unobserve(entry.target);
      var figure = JSON.parse(entry.target.querySelector("script").textContent);
      Plotly.newPlot(entry.target, figure.data, figure.layout, config);
    });
  }, {rootMargin: "200px"});
  document.querySelectorAll(".lazy-graph").forEach(function (node) { inView.observe(node); });
})();</script>"""


class ExportError(LanternUserError):
    """The run folder or the chosen datapoints cannot be exported."""


# ------------------------------------------------------------------ HTML
def write_html(path: str, title: str, sections: Iterable[Section], note: str = "",
               selection: Optional[Selection] = None) -> None:
    """Write the sections (figures, pictures, tables and alerts) as one HTML file; plotly.js is in it once, when
    a chart needs it. Atomic."""
    parts, charts = [], 0
    for heading, items in sections:
        parts.append(f'<section><h2>{html.escape(heading)}</h2>')
        for item in items:
            if isinstance(item, go.Figure):
                charts += not (is_picture(item) or is_table(item))
                parts.append(_figure_html(item))
            elif isinstance(item, Picture):
                caption = html.escape(item.caption)
                parts.append(f'<figure><figcaption>{caption}</figcaption><img class="input" '
                             f'src="{html.escape(item.source)}" alt="{caption}" loading="lazy"></figure>')
            elif isinstance(item, Note):
                parts.append(f'<p class="note">{html.escape(item)}</p>')
            elif isinstance(item, Records):
                parts.append(_html_table(item))
            else:
                parts.append(f'<div class="alert">{html.escape(item)}</div>')
        parts.append("</section>")
    chosen = "" if selection is None else (
        f"<p class='selection'>{html.escape(selection.description)}</p>"
        f"<script type='application/json' id='lantern-selection'>"
        f"{_script_json(json.dumps(selection.record, default=str))}</script>")
    plotly = f"<script>{plotly_js()}</script>{_DRAW_IN_VIEW}" if charts else ""
    page = (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{chosen}"
            f"<p class='note'>{html.escape(note)}</p>{''.join(parts)}{plotly}</body></html>\n")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)

    def write(temp: str) -> None:
        with open(temp, "w", encoding="utf-8") as f:
            f.write(page)

    atomic_write(path, write)


def _figure_html(figure: go.Figure) -> str:
    """A figure as the Datapoint tab draws it: a picture as an image, a table as text, a chart drawn in view."""
    title = html.escape(str(figure.layout.title.text or ""))
    if is_picture(figure):
        svg, span = picture_svg(figure)  # as text, not base64 again: its maps are base64 PNGs already
        source = html.escape("data:image/svg+xml;charset=utf-8," + svg.replace("%", "%25").replace("#", "%23"))
        return f'<figure><figcaption>{title}</figcaption><img src="{source}" alt="{title}" title="{span}" ' \
               'loading="lazy"></figure>'
    if is_table(figure):
        return f'<figure><figcaption>{title}</figcaption><pre class="figure-table">' \
               f'{html.escape(table_text(figure))}</pre></figure>'
    return f'<div class="lazy-graph" style="height:{figure.layout.height or 450}px">' \
           f'<script type="application/json">{_script_json(figure.to_json())}</script></div>'


def _script_json(text: str) -> str:
    """JSON text made safe inside a ``<script>``: no ``</script>`` (nor any tag) in a value can end it early."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _html_table(rows: Records) -> str:
    columns = list(dict.fromkeys(name for row in rows for name in row))
    head = "".join(f"<th>{html.escape(str(name))}</th>" for name in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(row.get(name)))}</td>" for name in columns) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    return "" if value is None else f"{value:.4g}" if isinstance(value, float) else value_summary(value)


def datapoint_items(outputs: Mapping[str, Any], context: DrawContext = NO_CONTEXT,
                    shared: Optional[dict[str, go.Figure]] = None) -> list[Item]:
    """Each debugger's figures, titled with its name and drawn with ``context`` as the viewer draws them (through
    the figure registry); errors and skipped layers as alerts. With ``shared``, a figure of a state the same for
    every datapoint (a position encoding) goes there once, by title, and the datapoint gets a note instead."""
    items: list[Item] = []
    for name, output in outputs.items():
        kind = output.get("kind") if isinstance(output, dict) else None
        if kind in (KIND_ERROR, KIND_NOT_RUN):
            detail = f"{output.get('type')}: " if kind == KIND_ERROR else "not run: "
            items.append(f"{name}: {detail}{output.get('message')}")
            continue
        try:
            figures = output_figures(output, context)
        except Exception as exc:  # one odd output (a crafted page) must not cost the rest of the report
            items.append(f"{name}: this output cannot be drawn ({type(exc).__name__}: {exc})")
            continue
        for fig in figures:
            fig.update_layout(title_text=f"{name}: {fig.layout.title.text or ''}")
            if shared is None or not is_shared(fig):
                items.append(fig)
                continue
            shared.setdefault(fig.layout.title.text, fig)
            items.append(Note(f"{fig.layout.title.text}: drawn once, under '{SHARED_SECTION}'"))
    return [*attention_across_layers_figures(dict(outputs)), *items]


# ------------------------------------------------------------------- runs
def load_inputs(backend: ViewerBackend, run_dir: str, indices: list[int]) -> tuple[dict[int, dict], str]:
    """``{idx: {'inputs', 'labels', 'meta_info'}}`` exactly as the viewer shows them (captured by the run;
    rebuilt from its config only where the backend's ``trust_configs``), and a note on where they come from or why
    some are missing (the report is useful without them)."""
    run = backend.run(os.path.abspath(run_dir))
    if run is None:
        return {}, f"input images unavailable: {'; '.join(backend.discovery.problems) or 'not a run'}"
    items = {idx: load_item(backend, run, idx) for idx in indices}
    problems = sorted({item["dataset_error"] for item in items.values() if "dataset_error" in item})
    found = {idx: item for idx, item in items.items() if "dataset_error" not in item}
    source = "captured by the run" + (", else rebuilt from its config file" if backend.trust_configs else "")
    note = f"input images {source}" if found else "no input images"
    return found, "; ".join([note, *(f"input images unavailable: {p}" for p in problems)])


def _image_of(datapoint: Optional[dict[str, Any]]) -> Optional[np.ndarray]:
    """The datapoint's input image (what Grad-CAM is drawn over), as the viewer finds it."""
    return first_image((datapoint or {}).get("inputs"))


def _summary(datapoint: Optional[dict[str, Any]], row: Optional[dict[str, Any]]) -> list[Item]:
    """The datapoint's row of the epoch table (label, prediction, scores), its input image (its prompt points
    ringed), then its labels and meta info."""
    items: list[Item] = [Records([row])] if row else []
    image = _image_of(datapoint)
    if image is not None:
        points = prompt_points((datapoint or {}).get("inputs"))
        png = base64.b64encode(picture_png(image, None, INPUT_PX, points)).decode("ascii")
        items.append(Picture(f"data:image/png;base64,{png}", "input image"))
    for part in ("labels", "meta_info"):
        values = (datapoint or {}).get(part)
        if values:
            items += [Note(part.replace("_", " ")), Records([{key: value for key, value in values.items()}])]
    return items


def _datapoint_section(outputs: Union[EpochDebug, EpochDebugError], idx: int, datapoint: Optional[dict[str, Any]],
                       row: Optional[dict[str, Any]], found: TableRows, shared: dict[str, go.Figure]) -> list[Item]:
    if isinstance(outputs, EpochDebugError):
        return [*_summary(datapoint, row), str(outputs)]
    try:
        debug_outputs = outputs.get(idx)
    except (CorruptPageError, OSError) as exc:
        return [*_summary(datapoint, row), f"debug outputs of idx {idx} cannot be read: {exc}"]
    if debug_outputs is None:
        indices = outputs.indices  # read without error before (``export_report``)
        return [f"no debug outputs for idx {idx}; this epoch has idx {min(indices)}..{max(indices)} "
                f"({len(indices)} datapoints)"]
    context = replace(DrawContext.of(datapoint or {}), class_names=found.class_names)  # calibration: drawn once
    return _summary(datapoint, row) + datapoint_items(debug_outputs, context, shared)


@dataclass
class TableRows:
    """The report's datapoints as the epoch's table has them: a row each (``idx``, ``label`` and ``prediction`` by
    class name, the scores), the class names, and notes on what could not be read."""

    rows: dict[int, dict[str, Any]] = field(default_factory=dict)
    class_names: dict[int, str] = field(default_factory=dict)
    problems: list[Item] = field(default_factory=list)
    epoch_label: Optional[str] = None
    run_name: Optional[str] = None
    calibration: Optional[Calibration] = None


def table_rows(backend: ViewerBackend, run_dir: str, epoch_dir: str, indices: list[int]) -> TableRows:
    """Each datapoint's row of the epoch's table and the epoch's calibration pairs, read as the viewer reads them
    (``ViewerBackend.table``, ``ViewerBackend.calibration``): ``label`` and ``prediction`` as the viewer shows them
    (``ring (4)``), so no column repeats another (``label_name``, ``predicted_class``); a note instead when the epoch
    has no readable table (the report is useful without)."""
    run = backend.run(os.path.abspath(run_dir))
    epoch = next((e for e in backend.epochs(run) if os.path.abspath(e.dir) == os.path.abspath(epoch_dir)),
                 None) if run else None
    if epoch is None:
        return TableRows(problems=[Note(f"scores unavailable: {os.path.basename(epoch_dir)} is not an epoch of a run "
                                        "the viewer can read")])
    found = TableRows(epoch_label=epoch.label, run_name=run.name)
    try:
        table = backend.table(epoch)
        rows = table.page(where=[("idx", "in", indices)], order_by="idx", descending=False, limit=len(indices))
        found.class_names = backend.class_names(epoch)
        found.calibration = backend.calibration(epoch)
    except TABLE_ERRORS as exc:
        found.problems.append(Note(f"scores unavailable: {exc}"))
        return found
    if "problem" in table.roles:
        found.problems.append(Note(f"scores unavailable: {table.roles['problem']}"))
    scores = [name for name in table.roles.get("scores", []) if name not in HIDDEN_COLUMNS]
    tags = _run_tags(run.path)
    for row in rows:
        classes = {key: class_text(row[key], found.class_names) for key in ("label", "prediction")
                   if row.get(key) is not None}
        tagged = {TAGS_COLUMN: tags.cells([row["idx"]])[0]} if tags.tags else {}
        found.rows[row["idx"]] = {"idx": row["idx"], **classes, **tagged,
                                  **{name: row[name] for name in scores if name in row}}
    return found


def _run_tags(run_path: str) -> RunTags:
    """The run's tags, shown beside each datapoint's scores; none where its tags file cannot be used (the viewer's
    tag bar says why)."""
    try:
        return run_tags(run_path)
    except TagsFileError:
        return RunTags({}, "")


def export_report(run_dir: str, indices: list[int], out: str, epoch: Optional[int] = None,
                  backend: Optional[ViewerBackend] = None, selection: Optional[Selection] = None) -> str:
    """Write the HTML report of ``indices`` (in that order) and return its path; what cannot be read is an alert
    in it. ``backend`` reads the run: the viewer's own when it exports (its cached tables and datasets, its
    ``trust_configs``); by default one that trusts no config. ``selection`` says how the datapoints were chosen
    (default: by their idx)."""
    backend = backend or ViewerBackend([run_dir])
    epoch_dir = RunDir(run_dir).epoch_dir(epoch, DEBUGGER_DIR)
    outputs = _open_outputs(epoch_dir)
    datapoints, note = load_inputs(backend, run_dir, indices)
    found = table_rows(backend, run_dir, epoch_dir, indices)
    summary = Records(found.rows[i] for i in indices if i in found.rows)
    sections: list[Section] = [("Datapoints", [*found.problems, *([summary] if summary else []),
                                               *_calibration(found, indices)]),
                               *_model_section(run_dir)]
    shared: dict[str, go.Figure] = {}
    drawn = [(f"Datapoint {idx}", _datapoint_section(outputs, idx, datapoints.get(idx), found.rows.get(idx), found,
                                                     shared))
             for idx in indices]
    sections += [*([(SHARED_SECTION, list(shared.values()))] if shared else []), *drawn]
    run_name = found.run_name or os.path.basename(os.path.abspath(run_dir))
    epoch_name = found.epoch_label or os.path.basename(os.path.abspath(epoch_dir))
    selection = selection or Selection(f"{len(indices)} datapoints chosen by idx: {', '.join(map(str, indices))}",
                                       {"idx": list(indices)})
    write_html(out, f"Lantern debug report: {run_name} · {epoch_name}", sections,
               note=f"run {run_name}, {epoch_name}; {note}", selection=selection)
    return out


def _calibration(found: TableRows, indices: list[int]) -> list[Item]:
    """The epoch's IoU calibration (``calibration_figure``) once, the report's datapoints starred: drawn with each
    datapoint's masks, as the viewer draws it, it was the epoch's points again and again, a quarter of the report."""
    pair = (found.calibration or {}).get("iou")
    if pair is None or not len(pair.get("true", ())) or pair.get("idx") is None:
        return []
    return [calibration_figure(pair["true"], pair["predicted"], pair["idx"], chosen=indices)]


def _open_outputs(epoch_dir: str) -> Union[EpochDebug, EpochDebugError]:
    """The epoch's debug outputs with their index read, or why they cannot be read (an alert per datapoint)."""
    try:
        outputs = open_epoch_debug(epoch_dir)
        if outputs is None or not outputs.indices:
            raise ExportError(f"{os.path.join(epoch_dir, DEBUGGER_DIR)} holds no datapoint's debug outputs")
    except (CorruptPageError, UnsafePageError, OSError) as exc:
        return exc if isinstance(exc, EpochDebugError) else EpochDebugError(
            f"the debug outputs in {os.path.join(epoch_dir, DEBUGGER_DIR)} cannot be read ({exc})")
    return outputs


def _model_section(run_dir: str) -> list[Section]:
    """The run's model report, an alert when it cannot be read or drawn, nothing when the run has none."""
    try:
        report = read_model_report(run_dir)
        return [] if report is None else [("Model", list(model_report_figures(report)))]
    except (OSError, ValueError) as exc:
        return [("Model", [f"{MODEL_REPORT_FILE} of the run cannot be read ({exc})"])]


"""The eval viewer's backend on tiny real runs: discovery, scores, ranking, debug pages and bad input."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil

import numpy as np
import pytest
from dash import html
from plotly.offline import get_plotlyjs_version

from analysis.epoch_table import EpochTable
from data.datasets import SyntheticShapesDataset
from data.viewer.layout.display import display_datapoint
from debuggers.pages import reader
from run_dir.names import EPOCH_TABLE_FILE
from runners.config_file import load_config
from runners.eval_viewer.__main__ import parse_args
from runners.eval_viewer.app import create_app
from runners.eval_viewer.compare_runs.data import Side
from runners.eval_viewer.compare_runs.view import run_columns, same_item
from runners.eval_viewer.controls.view import epoch_badges
from runners.eval_viewer.datapoint.display_debug_outputs import display_debug_outputs
from runners.eval_viewer.datapoint.view import render_datapoint
from runners.eval_viewer.model_report.view import render_model_report
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.browser_input import paging
from runners.eval_viewer.shared.datapoint import load_datapoint
from runners.eval_viewer.shared.plotly_bundle import (
    DASH_PLOTLY_BUNDLE,
    SLIM_PLOTLY,
    SLIM_PLOTLY_BUNDLE,
    SLIM_PLOTLY_JS_VERSION,
    plotly_js,
    plotly_url,
)
from runners.eval_viewer.shared.runs import EVALUATION_KEY, discover_runs, list_epochs, read_model_report
from runners.eval_viewer.shared.scores import Scores, ScoresError, default_metric, read_scores
from runners.eval_viewer.shared.table import ScoresTable
from runners.eval_viewer.table.data import DEBUG_MARK, table_rows, where_of
from runners.eval_viewer.table.view import column_defs
from runners.evaluators import BaseEvaluator
from runners.trainers import BaseTrainer
from tests.runs import write_config

DEBUGGER = """
from configs.examples.custom_debugger_trainer import ChannelEnergyDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"page_size_mb": 0.001, "debuggers_config": [
    {"name": "layer3_energy",
     "debugger_config": {"class": ChannelEnergyDebugger, "args": {"layer_name": "backbone.layer3"}}}]}}
"""
EVALUATOR = DEBUGGER + """
from runners.evaluators import BaseEvaluator
config["runner"] = BaseEvaluator
config["eval_dataset"] = config.pop("val_dataset")
config["eval_dataloader"] = config.pop("val_dataloader")
config["checkpoint"] = CHECKPOINT
for key in ("train_dataset", "train_dataloader", "criterion", "optimizer", "scheduler", "epochs"):
    config.pop(key)
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A trainer run (epoch 0 without, epoch 1 with debug outputs in several pages) and an evaluator run,
    nested in ``logs/group``; their configs live outside the log folder, as a project's configs do."""
    root = tmp_path_factory.mktemp("viewer")
    (root / "configs").mkdir()
    trainer_dir, evaluator_dir = root / "logs" / "group" / "trainer", root / "logs" / "group" / "evaluator"
    trainer_config = load_config(write_config(root / "configs" / "trainer.py", trainer_dir, extra=DEBUGGER))
    BaseTrainer(trainer_config).run()
    evaluator_path = write_config(root / "configs" / "evaluator.py", evaluator_dir,
                                  extra=f"CHECKPOINT = {str(trainer_dir)!r}\n" + EVALUATOR)
    BaseEvaluator(load_config(evaluator_path)).run()
    return {"root": root, "logs": str(root / "logs"), "trainer": str(trainer_dir), "evaluator": str(evaluator_dir)}


@pytest.fixture
def trainer_copy(runs, tmp_path):
    """A copy of the trainer run that a test may damage; its config stays outside the log folder."""
    path = tmp_path / "logs" / "trainer"
    shutil.copytree(runs["trainer"], path)
    return str(path)


def _open(log_dir, run_path, epoch_key, idx, trust_configs=False):
    backend = ViewerBackend([log_dir], trust_configs=trust_configs)
    run = backend.run(run_path)
    return load_datapoint(backend, run, backend.epoch(run, epoch_key), idx)


def _sections(component) -> list[str]:
    """Section headings of a rendered datapoint, in order."""
    found = []

    def walk(node):
        if isinstance(node, html.H4):
            found.append(node.children)
        children = getattr(node, "children", None)
        for child in children if isinstance(children, (list, tuple)) else [children]:
            if hasattr(child, "to_plotly_json"):
                walk(child)

    walk(component)
    return found


def _text(component) -> str:
    return json.dumps(component.to_plotly_json(), default=lambda c: c.to_plotly_json())


# ----------------------------------------------------------------- discovery
def test_nested_runs_are_discovered_and_folders_without_runs_are_explained(runs, tmp_path):
    empty = tmp_path / "not_a_run"
    (empty / "something").mkdir(parents=True)
    discovery = discover_runs([runs["logs"], str(empty), str(tmp_path / "missing")])
    assert set(discovery.runs) == {runs["trainer"], runs["evaluator"]}
    assert discovery.runs[runs["evaluator"]].is_evaluator and not discovery.runs[runs["trainer"]].is_evaluator
    assert len(discovery.problems) == 2
    assert "holds no Lantern run" in discovery.problems[0] and "run_info.json" in discovery.problems[0]
    assert "no such folder" in discovery.problems[1]


def test_a_run_given_directly_is_discovered(runs):
    assert list(discover_runs([runs["trainer"]]).runs) == [runs["trainer"]]


def test_the_command_line_listens_on_localhost_unless_told_otherwise():
    assert parse_args(["--log-dirs", "logs"]).host == "127.0.0.1"
    assert parse_args(["--log-dirs", "a", "b", "--host", "0.0.0.0"]).log_dirs == ["a", "b"]


def test_folder_that_is_not_a_run_is_reported_in_the_page(tmp_path):
    app = create_app([str(tmp_path)])
    page = _text(app.layout())
    assert "holds no Lantern run" in page and "run_info.json" in page


def test_the_slim_plotly_bundle_is_served_only_with_the_plotly_js_it_was_built_from(tmp_path):
    with open(SLIM_PLOTLY, encoding="utf-8") as f:
        bundle = f.read()
    assert re.findall(r'version="(\d+\.\d+\.\d+)"', bundle) == [SLIM_PLOTLY_JS_VERSION]
    assert (plotly_js() == bundle) == (get_plotlyjs_version() == SLIM_PLOTLY_JS_VERSION)  # what an export embeds
    assert plotly_url("/", "0.0.1") == f"/{DASH_PLOTLY_BUNDLE}"
    assert plotly_url("/", SLIM_PLOTLY_JS_VERSION) == f"/assets/{SLIM_PLOTLY_BUNDLE}"
    client = create_app([str(tmp_path)]).server.test_client()
    index = client.get("/").get_data(as_text=True)
    assert f'src="/assets/{SLIM_PLOTLY_BUNDLE}' not in index  # not a script of the first page: loaded when idle
    expected = plotly_url("/", get_plotlyjs_version())
    assert f"window.lanternPlotlyURL = {json.dumps(expected)}" in index
    assert client.get(expected).status_code == 200


# ----------------------------------------------------------------- epochs and scores
def test_epochs_scores_and_debug_availability(runs):
    backend = ViewerBackend([runs["logs"]])
    trainer, evaluator = backend.run(runs["trainer"]), backend.run(runs["evaluator"])
    epochs = list_epochs(trainer)
    assert [(e.key, e.has_debug) for e in epochs] == [("epoch_0", False), ("epoch_1", True)]
    [evaluation] = list_epochs(evaluator)
    assert evaluation.key == EVALUATION_KEY and evaluation.has_debug and evaluation.dir == runs["evaluator"]
    for epoch in epochs:
        with open(epoch.scores_path) as f:
            assert backend.aggregated(epoch) == json.load(f)["aggregated"]
    debug = backend.debug(epochs[1])
    assert debug.complete and debug.indices == set(range(24))
    assert backend.debug(epochs[0]) is None


def test_the_table_sorts_each_metric_worst_first_and_defaults_to_the_loss(runs):
    epoch_dir = os.path.join(runs["trainer"], "epoch_1")
    scores = read_scores(os.path.join(epoch_dir, "validation_scores.json"))
    for table in (ScoresTable(scores), EpochTable(os.path.join(epoch_dir, EPOCH_TABLE_FILE))):
        for metric in scores.rankable_metrics:
            higher = scores.higher_is_better[metric]
            rows = table.page(order_by=metric, descending=not higher, limit=1000)
            assert [row[metric] for row in rows] == pytest.approx(
                sorted(scores.per_datapoint[metric], reverse=not higher)), metric
    roles = {"higher_is_better": scores.higher_is_better}
    assert default_metric(scores.rankable_metrics, roles) == "cross_entropy"  # not a 0/1 tie


def test_missing_scores_rank_last_and_ties_keep_idx_order():
    table = ScoresTable(Scores({}, {"loss": [0.5, None, 2.0, 0.5]}, [10, 11, 12, 13], {"loss": False}))
    assert [row["idx"] for row in table.page(order_by="loss", descending=True)] == [12, 10, 13, 11]
    assert [row["idx"] for row in table.page(order_by="loss", descending=False)] == [10, 13, 12, 11]


def test_filters_pages_and_percentiles_of_the_table():
    losses = [0.1 * i for i in range(50)]
    table = ScoresTable(Scores({}, {"loss": losses}, list(range(100, 150)), {"loss": False}))
    kinds = dict(table.columns())
    where = where_of({"idx": {"filterType": "text", "type": "contains", "filter": "123"},
                      "loss": {"filterType": "text", "type": "contains", "filter": "< 4"}}, kinds, {})
    assert [row["idx"] for row in table.page(where)] == [123] and table.count(where) == 1
    page = table.page(where_of({"loss": {"filterType": "text", "type": "contains", "filter": "1..2"}}, kinds, {}),
                      order_by="loss", descending=True, offset=2, limit=3)
    assert [row["idx"] for row in page] == [118, 117, 116]
    where = where_of({"idx": {"filterType": "text", "filter": "!= 100, 101"}, "loss": {"type": "notBlank"}}, kinds, {})
    assert table.count(where) == 48
    assert table.percentile("loss", 0.1 * 24) == 50.0  # 25 of 50 values are at most the 25th smallest


def test_new_epochs_appear_while_a_run_is_training(trainer_copy, tmp_path):
    hidden = tmp_path / "epoch_1"
    shutil.move(os.path.join(trainer_copy, "epoch_1"), hidden)
    backend = ViewerBackend([trainer_copy])
    run = backend.run(trainer_copy)
    assert [e.key for e in backend.epochs(run)] == ["epoch_0"]
    shutil.move(hidden, os.path.join(trainer_copy, "epoch_1"))
    assert [e.key for e in backend.epochs(run)] == ["epoch_0", "epoch_1"]


def test_partial_epoch_is_flagged_and_a_rewritten_index_is_noticed(trainer_copy):
    backend = ViewerBackend([trainer_copy])
    epoch = backend.epoch(backend.run(trainer_copy), "epoch_1")
    version = backend.version(epoch)
    assert backend.debug(epoch).complete
    index_path = os.path.join(trainer_copy, "epoch_1", "debugger", "index.json")
    with open(index_path) as f:
        index = json.load(f)
    index["complete"] = False
    with open(index_path, "w") as f:
        json.dump(index, f, indent=1)
    assert backend.version(epoch) != version
    assert not backend.debug(epoch).complete
    assert "partial" in _text(html.Div(epoch_badges(backend, epoch)))


# ----------------------------------------------------------------- opening a datapoint
def test_opening_a_datapoint_reads_exactly_one_page(runs, monkeypatch):
    pages = len([n for n in os.listdir(os.path.join(runs["trainer"], "epoch_1", "debugger")) if n.endswith(".pkl")])
    assert pages > 3
    opened = []
    real_open = reader.open_regular
    monkeypatch.setattr(reader, "open_regular", lambda path, *how: opened.append(path) or real_open(path, *how))
    datapoint = _open(runs["logs"], runs["trainer"], "epoch_1", 5)
    assert len([path for path in opened if os.sep + "debugger" + os.sep in path]) == 1
    assert set(datapoint["debug"]) == {"layer3_energy"}
    assert datapoint["meta_info"]["idx"] == 5 and tuple(datapoint["inputs"]["image"].shape) == (3, 16, 16)


def test_datapoint_has_four_sections_at_a_debug_epoch_and_three_without(runs):
    backend = ViewerBackend([runs["logs"]])
    with_debug = render_datapoint(backend, runs["trainer"], "epoch_1", 3)
    assert _sections(with_debug) == ["Inputs", "Labels", "Meta info", "Debug Outputs"]
    assert "debug-figure" in _text(with_debug)  # drawn through the figure registry
    assert _sections(render_datapoint(backend, runs["trainer"], "epoch_0", 3)) == ["Inputs", "Labels", "Meta info"]
    evaluated = render_datapoint(backend, runs["evaluator"], EVALUATION_KEY, 3)
    assert _sections(evaluated) == ["Inputs", "Labels", "Meta info", "Debug Outputs"]


def test_debugger_error_and_not_run_records_are_shown_as_such():
    body = _text(display_debug_outputs({
        "broken": {"kind": "error", "type": "ZeroDivisionError", "message": "division by zero", "traceback": "tb"},
        "skipped": {"kind": "not_run", "message": "layer 'head' did not run in this forward pass"},
    }))
    assert "debugger-error" in body and "ZeroDivisionError" in body and "division by zero" in body
    assert "not-run-note" in body and "did not run" in body


def _page_path(run_dir, idx):
    page = reader.load_debug_outputs(os.path.join(run_dir, "epoch_1")).locations[idx]
    return os.path.join(run_dir, "epoch_1", "debugger", page)


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_corrupt_page_is_reported_and_the_rest_still_shows(trainer_copy):
    with open(_page_path(trainer_copy, 4), "r+b") as f:
        f.truncate(40)
    datapoint = _open(trainer_copy, trainer_copy, "epoch_1", 4)
    assert "truncated or not a Lantern page" in datapoint["debug_error"]
    assert datapoint["inputs"] is not None and datapoint["scores"]
    assert "page-error" in _text(display_datapoint(datapoint))


def test_malicious_page_is_refused_without_running_it(trainer_copy, tmp_path):
    marker = tmp_path / "exploited"
    with open(_page_path(trainer_copy, 4), "wb") as f:
        pickle.dump({4: {"layer3_energy": _Exploit(marker)}}, f)
    datapoint = _open(trainer_copy, trainer_copy, "epoch_1", 4)
    assert "not a Lantern page" in datapoint["debug_error"]  # read as data, never unpickled
    assert not marker.exists()


def test_missing_page_is_reported(trainer_copy):
    os.remove(_page_path(trainer_copy, 4))
    datapoint = _open(trainer_copy, trainer_copy, "epoch_1", 4)
    assert "missing" in datapoint["debug_error"] and "rerun the epoch" in datapoint["debug_error"]


def test_config_inside_the_log_folder_is_never_imported(trainer_copy, tmp_path):
    marker = tmp_path / "imported"
    config_path = os.path.join(trainer_copy, "config.py")
    with open(config_path, "w") as f:
        f.write(f"open({str(marker)!r}, 'w').close()\nconfig = {{}}\n")
    info_path = os.path.join(trainer_copy, "run_info.json")
    with open(info_path) as f:
        info = json.load(f)
    with open(info_path, "w") as f:
        json.dump({**info, "config_filepath": config_path}, f)
    shutil.rmtree(os.path.join(trainer_copy, "datapoints"))  # a run that captured nothing: rebuilt on opt-in
    datapoint = _open(trainer_copy, trainer_copy, "epoch_1", 2, trust_configs=True)
    assert "inside the log folder" in datapoint["dataset_error"] and not marker.exists()
    assert set(datapoint["debug"]) == {"layer3_energy"}  # scores and debug outputs still show


def test_table_rows_are_worst_first_and_mark_debug_outputs(runs):
    backend = ViewerBackend([runs["logs"]])
    query = {"run": runs["trainer"], "epoch": "epoch_1"}
    sort = paging({"sortModel": [{"colId": "cross_entropy", "sort": "desc"}]})
    rows, count, total, label = table_rows(backend, query, sort)
    losses = [row["cross_entropy"] for row in rows]
    assert losses == sorted(losses, reverse=True) and (count, total, label) == (24, 24, "epoch 1")
    columns = column_defs(backend, backend.epoch(backend.run(runs["trainer"]), "epoch_1"), "cross_entropy")
    fields = [c.get("field") for c in columns]
    assert fields[1:5] == ["idx", "label", "prediction", "cross_entropy"] and columns[4]["sort"] == "desc"
    assert "class_name" in fields and "label_name" not in fields  # meta info shown; names shown in label
    names = SyntheticShapesDataset.CLASS_NAMES
    assert columns[2]["refData"] == {str(i): f"{name} ({i})" for i, name in enumerate(names) if str(i) in
                                     columns[2]["refData"]}
    label_filter = where_of({"label": {"filterType": "text", "type": "contains", "filter": "RING"}}, {},
                            backend.class_names(backend.epoch(backend.run(runs["trainer"]), "epoch_1")))
    rows, count, _, _ = table_rows(backend, query, paging({"filterModel": {"label": {"filterType": "text",
                                                                                     "filter": "ring"}}}))
    assert label_filter == [("label", "in", [names.index("ring")])]
    assert count == len(rows) > 0 and all(row["label_name"] == "ring" for row in rows)
    assert all(row["debug"] == DEBUG_MARK for row in rows)
    rows, _, _, _ = table_rows(backend, {"run": runs["trainer"], "epoch": "epoch_0"}, sort)
    assert len(rows) == 24 and not any(row["debug"] for row in rows)
    rows, count, _, _ = table_rows(backend, {**query, "idx": [3, 5, 99]}, sort)
    assert sorted(row["idx"] for row in rows) == [3, 5] and count == 2


def test_unreadable_scores_file_is_explained_and_debug_outputs_still_open(trainer_copy):
    for name in ("validation_scores.json", EPOCH_TABLE_FILE):
        with open(os.path.join(trainer_copy, "epoch_1", name), "w") as f:
            f.write("{not json")
    backend = ViewerBackend([trainer_copy])
    rows, count, _, _ = table_rows(backend, {"run": trainer_copy, "epoch": "epoch_1"}, paging({}))
    assert count == 24 and [row["idx"] for row in rows] == list(range(24))  # the captured ones can be opened
    with pytest.raises(ScoresError, match="cannot be read as JSON"):
        backend.scores(backend.epoch(backend.run(trainer_copy), "epoch_1"))
    datapoint = _open(trainer_copy, trainer_copy, "epoch_1", 2)
    assert "not a readable Parquet file" in datapoint["scores_error"]
    assert set(datapoint["debug"]) == {"layer3_energy"}



@pytest.mark.parametrize("value, kind", [("1.5", "str"), ([1.0], "list")])
def test_a_score_that_is_a_string_or_a_list_is_refused_not_taken_as_a_number(tmp_path, value, kind):
    path = tmp_path / "validation_scores.json"
    path.write_text(json.dumps({"aggregated": {"loss": 1.0}, "per_datapoint": {"loss": [1.0, value]},
                                "datapoint_idx": [0, 1], "higher_is_better": {"loss": False}}))
    with pytest.raises(ScoresError, match=rf"per-datapoint score 'loss' holds a value that is not a number \(a "
                                          rf"{kind} where a number belongs\).*rerun the epoch"):
        read_scores(str(path))


def test_a_boolean_score_of_a_run_written_before_they_were_0_and_1_still_opens(tmp_path):
    """Lantern wrote a metric's boolean scores as true/false until they were written as 1/0."""
    path = tmp_path / "validation_scores.json"
    path.write_text(json.dumps({"aggregated": {"correct": 0.5}, "per_datapoint": {"correct": [True, False, None]},
                                "datapoint_idx": [0, 1, 2], "higher_is_better": {"correct": True}}))
    np.testing.assert_array_equal(read_scores(str(path)).per_datapoint["correct"], [1.0, 0.0, np.nan])

def test_the_same_datapoint_in_two_runs_shows_its_inputs_once_then_both_sides(runs):
    backend = ViewerBackend([runs["logs"]])
    runs_compared = (backend.run(runs["trainer"]), backend.run(runs["evaluator"]))
    sides = [Side(run, backend.epochs(run)[-1]) for run in runs_compared]
    title, summary, debug = run_columns(backend, sides, 7).children  # the same validation set: its inputs once
    assert title.children == "datapoint 7 · logs/group/trainer · epoch 1 and logs/group/evaluator · evaluation"
    assert _sections(summary) == ["Inputs", "Labels", "Meta info"]
    assert _sections(debug) == ["Debug Outputs"] and "layer3_energy" in str(debug)
    image = np.arange(48, dtype=np.float32).reshape(3, 4, 4)
    item = {"inputs": {"image": image}, "labels": {"class": 1}, "meta_info": {"idx": 7, "scale": 0.5}}
    assert same_item(item, {**item, "inputs": {"image": image.copy()}})
    for other in ({"image": image + 1}, {"image": image[:2]}, {"image": image.tolist()}):
        assert not same_item(item, {**item, "inputs": other})
    assert not same_item(item, {**item, "labels": {"class": 2}})


def test_model_report_tab(runs, trainer_copy):
    backend = ViewerBackend([runs["logs"], trainer_copy])
    assert "layers" in read_model_report(runs["trainer"])
    assert "report-figure" in _text(render_model_report(backend, runs["trainer"]))
    os.remove(os.path.join(trainer_copy, "model_report.json"))
    assert "has no model_report.json" in _text(render_model_report(backend, trainer_copy))

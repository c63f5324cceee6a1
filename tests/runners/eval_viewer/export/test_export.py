"""The HTML export of a real (tiny) run: plotly.js once, one section per datapoint, images when available."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from urllib.parse import unquote

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from analysis.epoch_table import EpochTable
from data.datasets import SyntheticShapesDataset
from debuggers.capture_debugger import CaptureDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from models import AttentionClassifier, SmallCNN
from run_dir import RunDir
from run_dir.names import DEBUGGER_DIR, EPOCH_TABLE_FILE
from runners.config_file import load_config
from runners.eval_viewer.backend.initialization import load_debug_outputs
from runners.eval_viewer.export.__main__ import main
from runners.eval_viewer.export.debug_states import visualize_debug_states
from runners.eval_viewer.export.report import SHARED_SECTION, datapoint_items
from runners.eval_viewer.figures.context import DrawContext
from runners.eval_viewer.shared.plotly_bundle import plotly_js
from runners.trainers import BaseTrainer
from tests.debuggers.library import capture_epoch, entry
from tests.runs import REPO_ROOT, write_config

DEBUGGERS = """
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"debuggers_config": [
    {"name": "features", "debugger_config": {"class": FeatureMapDebugger,
                                             "args": {"layer_name": "backbone.layer4", "max_channels": 4}}},
    {"name": "gradcam", "debugger_config": {"class": GradCAMDebugger, "args": {"target_layer": "backbone.layer4"}}},
    {"name": "broken", "debugger_config": {"class": GradCAMDebugger, "args": {"target_layer": "head.fc"}}}]}}
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("export")
    config = load_config(write_config(folder / "run.py", folder / "run", epochs=2, checkpoint_method="all",
                                      train_size=16, val_size=16, extra=DEBUGGERS))
    BaseTrainer(config).run()
    return config["work_dir"]


def export(run_dir, out, *args):
    code = main(["--run", run_dir, "--out", str(out), *args])
    return code, out.read_text() if out.exists() else ""


def _pictures(page: str) -> dict[str, str]:
    """The report's pictures by caption: ``{title: svg}`` (maps drawn as images, as the Datapoint tab draws them)."""
    found = re.findall(r'<figure><figcaption>([^<]*)</figcaption><img src="data:image/svg\+xml;charset=utf-8,([^"]+)"',
                       page)
    return {html.unescape(title): unquote(html.unescape(svg)) for title, svg in found}


def test_report_draws_maps_as_images_one_section_per_idx_and_plotly_once(run_dir, tmp_path):
    code, page = export(run_dir, tmp_path / "report.html", "--idx", "3", "7", "12")
    assert code == 0
    assert page.count(plotly_js()[:200]) == 1  # for the charts (the model report), drawn when scrolled to
    assert [page.count(f"<h2>Datapoint {i}</h2>") for i in (3, 7, 12)] == [1, 1, 1]
    assert page.index("Datapoint 3") < page.index("Datapoint 7") < page.index("Datapoint 12")
    assert "<h2>Model</h2>" in page and "<h1>Lantern debug report: run · epoch 1</h1>" in page
    assert run_dir not in page.split("<section>")[0], "the title and notes name the run by its name, not its path"
    rows = EpochTable(os.path.join(run_dir, "epoch_1", EPOCH_TABLE_FILE)).page(where=[("idx", "in", [3, 7, 12])])
    cams = [svg for title, svg in _pictures(page).items() if title.startswith("gradcam: Grad-CAM at backbone.layer4")]
    assert len(cams) == 3 and '"type":"image"' not in page and '"type":"heatmap"' not in page  # images, no graphs
    for row, svg in zip(sorted(rows, key=lambda row: row["idx"]), cams):  # titled by role and class, as the viewer
        wrong = row["label"] != row["prediction"]
        titles = [f"label: {row['label_name']}", f"prediction: {row['prediction_name']}"] if wrong \
            else [f"label and prediction: {row['label_name']}"]
        assert svg.count("<image ") == len(titles) and all(f">{title}</text>" in svg for title in titles)
    assert page.count("which returned Tensor(8, 6); pick a layer before the model pools its positions away") == 3
    assert "features: backbone.layer4 feature map" in _pictures(page).__repr__()
    assert [title for title in _pictures(page) if title.endswith("(RGB)")], "the model's first conv filters, a picture"
    assert page.count("<th>class</th>") == 3  # each datapoint's labels as a table, not as Python text
    assert page.count('<div class="alert">') == 3  # only the broken debugger
    assert page.count("<figcaption>input image</figcaption>") == 3
    scores = json.loads(open(os.path.join(run_dir, "epoch_1", "validation_scores.json")).read())["per_datapoint"]
    for idx in (3, 7, 12):  # each score and prediction, readable, in the summary table and the datapoint's own
        assert page.count(f"<td>{scores['cross_entropy'][idx]:.4g}</td>") >= 2
    names = SyntheticShapesDataset.CLASS_NAMES
    predicted = int(scores["predicted_class"][3])
    assert f"<td>{names[predicted]} ({predicted})</td>" in page


def test_no_column_repeats_another_and_the_report_says_how_its_datapoints_were_chosen(run_dir, tmp_path):
    code, page = export(run_dir, tmp_path / "report.html", "--idx", "12", "3")
    header = re.search(r"<h2>Datapoints</h2><table><thead><tr>(.*?)</tr>", page).group(1)
    assert re.findall(r"<th>([^<]*)</th>", header) == ["idx", "label", "prediction", "accuracy", "cross_entropy",
                                                       "true_class_confidence"]
    assert "2 datapoints chosen by idx: 12, 3" in page
    record = re.search(r"<script type='application/json' id='lantern-selection'>(.*?)</script>", page).group(1)
    assert json.loads(record) == {"idx": [12, 3]}


def test_epoch_choice_and_missing_idx(run_dir, tmp_path):
    code, page = export(run_dir, tmp_path / "e0.html", "--epoch", "0", "--idx", "1", "99")
    assert code == 0 and "<h1>Lantern debug report: run · epoch 0</h1>" in page
    assert "no debug outputs for idx 99; this epoch has idx 0..15 (16 datapoints)" in page
    assert RunDir(run_dir).epoch_dir(holding=DEBUGGER_DIR) == os.path.join(run_dir, "epoch_1")


def test_unknown_epoch_and_folder_say_what_exists(run_dir, tmp_path, capsys):
    assert export(run_dir, tmp_path / "x.html", "--epoch", "5", "--idx", "1")[0] == 2
    assert "epoch 5 of" in (err := capsys.readouterr().err) and "epochs with debug outputs: [0, 1]" in err
    assert export(str(tmp_path / "nowhere"), tmp_path / "x.html", "--idx", "1")[0] == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_without_captured_inputs_or_the_config_file_there_is_no_overlay(run_dir, tmp_path):
    moved = shutil.copytree(run_dir, tmp_path / "moved")
    shutil.rmtree(moved / "datapoints")
    code, page = export(str(moved), tmp_path / "r.html", "--idx", "2")
    assert code == 0 and "<figcaption>input image</figcaption>" not in page and "--trust-configs" in page
    info = json.loads((moved / "run_info.json").read_text())
    info["config_filepath"] = str(tmp_path / "deleted.py")
    (moved / "run_info.json").write_text(json.dumps(info))
    code, page = export(str(moved), tmp_path / "r.html", "--idx", "2", "--trust-configs")
    assert code == 0 and "<figcaption>input image</figcaption>" not in page and "input images unavailable" in page


def test_evaluator_style_folder_and_notebook_helper(tmp_path):
    model = SmallCNN(widths=(4, 4, 4, 4)).eval()
    outputs = capture_epoch(model, torch.randn(4, 3, 16, 16), tmp_path / "eval", 2,
                            [entry("fm", FeatureMapDebugger, layer_name="backbone.layer4")])
    assert RunDir(str(tmp_path / "eval")).epoch_dir(holding=DEBUGGER_DIR) == str(tmp_path / "eval")
    figures = visualize_debug_states(outputs[2], save_path=str(tmp_path / "notebook"))
    assert figures and all(isinstance(f, go.Figure) for f in figures)
    assert figures[0].layout.title.text.startswith("fm: backbone.layer4 feature map")
    page = (tmp_path / "notebook" / "debug_states.html").read_text()
    assert list(_pictures(page)) == [figures[0].layout.title.text]  # a picture: the page needs no plotly.js
    assert plotly_js()[:200] not in page
    assert len(load_debug_outputs(str(tmp_path / "eval"))) == 4
    assert visualize_debug_states(outputs[2]["fm"])[0].layout.title.text.startswith("output: ")


def test_an_unreadable_page_becomes_an_alert(run_dir, tmp_path):
    moved = shutil.copytree(run_dir, tmp_path / "damaged")
    (moved / "epoch_1" / "debugger" / "page_0.pkl").write_bytes(b"not a page")
    code, page = export(str(moved), tmp_path / "d.html", "--idx", "4")
    assert code == 0 and "debug outputs of idx 4 cannot be read" in page


def test_a_state_shared_by_every_datapoint_is_drawn_once(tmp_path):
    torch.manual_seed(0)
    model = AttentionClassifier(patch_size=4, dim=16, depth=1, num_heads=2).eval()
    outputs = capture_epoch(model, torch.randn(3, 3, 16, 16), tmp_path / "eval", 3, [entry("cap", CaptureDebugger)])
    code, page = export(str(tmp_path / "eval"), tmp_path / "all.html", "--idx", "0", "1", "2")
    _, alone = export(str(tmp_path / "eval"), tmp_path / "one.html", "--idx", "0")
    assert code == 0
    title = '"text":"cap: pos_embed.position_encoding'
    assert page.count(title) == alone.count(title) >= 1  # three datapoints, the encoding's figures once
    assert page.count(f"<h2>{SHARED_SECTION}</h2>") == 1 and page.index(SHARED_SECTION) < page.index("Datapoint 0")
    assert page.count("drawn once, under") == 3 * alone.count("drawn once, under") > 0
    shared: dict = {}
    for idx in range(3):
        datapoint_items(outputs[idx], shared=shared)
    heat = next(fig for fig in shared.values() if isinstance(fig.data[0], go.Heatmap))
    expected = model.pos_embed.encoding((4, 4), torch.device("cpu"), torch.float32)[0].numpy()
    np.testing.assert_allclose(np.asarray(heat.data[0].z), expected, atol=1e-6)


def test_attention_axes_are_labelled_by_the_datapoints_tokens_as_in_the_viewer():
    attention = np.random.default_rng(0).dirichlet(np.ones(3), size=(2, 3)).astype(np.float32)
    output = {"kind": "attention", "layer_name": "attn", "attention": attention,
              "entropy_per_head": np.ones(2, np.float32), "max_attention": 0.9, "grid": None}
    tokens = ["[CLS]", "good", "film"]
    named = [item for item in datapoint_items({"att": output}, DrawContext(tokens=tokens))
             if isinstance(item, go.Figure)]
    plain = [item for item in datapoint_items({"att": output}) if isinstance(item, go.Figure)]
    assert list(named[0].layout.xaxis.ticktext[:3]) == tokens and named[0].layout.xaxis.title.text == "key token"
    assert plain[0].layout.xaxis.title.text == "key (token index)"


# The export command, as a user runs it, in a process of its own: the modules it imported when it is done.
_IMPORTED_BY_THE_EXPORT = """import runpy, sys
sys.argv = ["export", *sys.argv[1:]]
try:
    runpy.run_module("runners.eval_viewer.export", run_name="__main__")
except SystemExit as done:
    assert not done.code, done.code
print(" ".join(sorted({name.split(".")[0] for name in sys.modules})))
"""


def test_the_export_command_imports_no_torch_scikit_learn_or_dash(run_dir, tmp_path):
    """Its start-up was most of its time (torch, scikit-learn and Dash took 4-5 s of a 6 s report): what reads and
    draws a run imports none of them, so a module-level import that brings one back fails here."""
    out = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-c", _IMPORTED_BY_THE_EXPORT, "--run", run_dir, "--out", str(out),
                           "--idx", "0", "1"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    imported = set(done.stdout.split())
    assert out.stat().st_size > 0 and "plotly" in imported and "runners" in imported
    heavy = imported & {"torch", "sklearn", "dash", "scipy", "flask"}
    assert not heavy, f"the export imported {sorted(heavy)}"

"""BaseTrainer end to end on tiny real runs: files, checkpoints, resume, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from analysis.epoch_table import EpochTable
from run_dir.names import EPOCH_TABLE_FILE, MODEL_REPORT_FILE
from runners.config_file import load_config
from runners.eval_viewer.shared.scores import read_scores
from runners.trainers import BaseTrainer
from runners.unique_idx import SeenIdx, merge_rank_buffers
from tests.runs import REPO_ROOT, run_main, train
from utils.errors import ConfigError, DatasetContractError, MetricContractError, WorkDirError


def test_each_epoch_writes_its_files_and_scores_cover_every_datapoint(tiny_config):
    work_dir = train(tiny_config(epochs=2, val_size=20, val_batch=6))
    for epoch in range(2):
        losses = torch.load(os.path.join(work_dir, f"epoch_{epoch}", "training_losses.pt"))
        assert losses.shape == (64 // 16,) and torch.isfinite(losses).all()
        with open(os.path.join(work_dir, f"epoch_{epoch}", "validation_scores.json")) as f:
            scores = json.load(f)
        assert scores["datapoint_idx"] == list(range(20))
        for name, values in scores["per_datapoint"].items():
            assert len(values) == 20, name
        mean_accuracy = sum(scores["per_datapoint"]["accuracy"]) / 20
        assert scores["aggregated"]["accuracy"] == pytest.approx(mean_accuracy)
    progress = json.load(open(os.path.join(work_dir, "progress.json")))
    assert progress["completed_epochs"] == 2
    assert os.path.exists(os.path.join(work_dir, "train.log"))


@pytest.mark.parametrize("method, epochs, expected", [
    ("latest", 4, [3]),
    ("all", 3, [0, 1, 2]),
    (2, 5, [1, 3, 4]),
    (3, 6, [2, 5]),
])
def test_checkpoint_indices(tiny_config, method, epochs, expected):
    trainer = BaseTrainer(load_config(tiny_config(epochs=epochs, checkpoint_method=method)))
    trainer._init_checkpoint_indices()
    assert trainer.checkpoint_indices == expected


def test_only_requested_latest_and_best_checkpoints_are_kept(tiny_config):
    work_dir = train(tiny_config(epochs=4, checkpoint_method=2))
    progress = json.load(open(os.path.join(work_dir, "progress.json")))
    kept = {e for e in range(4) if os.path.exists(os.path.join(work_dir, f"epoch_{e}", "checkpoint.pt"))}
    assert kept == {1, 3} | {progress["best_epoch"]}


@pytest.mark.parametrize("method", ["often", 0, -2, 1.5, True])
def test_bad_checkpoint_method_is_explained(tiny_config, method):
    with pytest.raises(ConfigError, match="checkpoint_method"):
        BaseTrainer(load_config(tiny_config(checkpoint_method=method)))._init_checkpoint_indices()


def _final_scores(work_dir, epochs):
    with open(os.path.join(work_dir, f"epoch_{epochs - 1}", "validation_scores.json")) as f:
        return json.load(f)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_resume_after_kill_mid_epoch_gives_the_same_scores(tiny_config):
    options = dict(epochs=3, train_size=480, val_size=32)
    reference = train(tiny_config("reference", **options))
    config_path = tiny_config("killed", **options)
    work_dir = load_config(config_path)["work_dir"]
    process = subprocess.Popen([sys.executable, "main.py", "--config-filepath", config_path], cwd=REPO_ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    progress_path = os.path.join(work_dir, "progress.json")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if os.path.exists(progress_path) and json.load(open(progress_path))["completed_epochs"] == 1:
            break
        time.sleep(0.02)
    assert process.poll() is None, "the run ended before it could be killed mid-epoch"
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert json.load(open(progress_path))["completed_epochs"] == 1
    result = run_main(config_path)
    assert result.returncode == 0, result.stderr
    assert "Resuming after epoch 0" in open(os.path.join(work_dir, "train.log")).read()
    assert _final_scores(work_dir, 3) == _final_scores(reference, 3)


def test_work_dir_of_another_run_is_refused(tiny_config, tmp_path):
    work_dir = train(tiny_config("a", epochs=1))
    other = tiny_config("b", epochs=1, val_size=12)
    config = load_config(other)
    config["work_dir"] = work_dir
    with pytest.raises(WorkDirError, match="holds another run"):
        BaseTrainer(config).run()


def test_damaged_run_info_is_explained(tiny_config):
    config = load_config(tiny_config(epochs=1))
    os.makedirs(config["work_dir"])
    with open(os.path.join(config["work_dir"], "run_info.json"), "w") as f:
        f.write('{"runner": "BaseTr')
    with pytest.raises(WorkDirError, match="run_info.json is damaged"):
        BaseTrainer(config).run()


def test_model_entry_that_builds_no_module_is_explained(tiny_config):
    config = load_config(tiny_config(epochs=1))
    config["model"] = {"class": dict, "args": {}}
    with pytest.raises(ConfigError, match=r"config\['model'\] must build a torch.nn.Module, got dict"):
        BaseTrainer(config).run()


def test_non_run_folder_is_refused(tiny_config, tmp_path):
    config = load_config(tiny_config(epochs=1))
    os.makedirs(config["work_dir"])
    open(os.path.join(config["work_dir"], "notes.txt"), "w").close()
    with pytest.raises(WorkDirError, match="not a Lantern run"):
        BaseTrainer(config).run()


def test_finished_run_started_again_does_nothing_more(tiny_config):
    config_path = tiny_config(epochs=1)
    work_dir = train(config_path)
    before = os.path.getmtime(os.path.join(work_dir, "epoch_0", "checkpoint.pt"))
    train(config_path)
    assert os.path.getmtime(os.path.join(work_dir, "epoch_0", "checkpoint.pt")) == before


DEBUGGER_ON = """
from debuggers.feature_map_debugger import FeatureMapDebugger
config["debugger"] = {{"class": SequentialDebugger, "args": {{"debuggers_config": [
    {{"name": "features", "debugger_config": {{"class": FeatureMapDebugger, "args": {{"layer_name": {layer!r}}}}}}}]}}}}
"""


@pytest.mark.slow
def test_a_run_that_failed_at_start_up_leaves_its_work_dir_to_the_fixed_rerun(tiny_config):
    typo = tiny_config("run", epochs=1, extra=DEBUGGER_ON.format(layer="backbone.layr4"))
    result = run_main(typo)
    assert result.returncode == 2 and "backbone.layr4" in result.stderr
    work_dir = load_config(typo)["work_dir"]
    assert os.path.exists(os.path.join(work_dir, "run_info.json"))
    fixed = tiny_config("run", epochs=1, extra=DEBUGGER_ON.format(layer="backbone.layer4"))
    result = run_main(fixed)
    assert result.returncode == 0, result.stderr
    assert "finished nothing" in open(os.path.join(work_dir, "train.log")).read()
    assert os.path.isdir(os.path.join(work_dir, "epoch_0", "debugger"))



COUNTING_READS = """
class CountingReads(SyntheticShapesDataset):
    reads = []

    def __getitem__(self, i):
        type(self).reads.append(i)
        return super().__getitem__(i)


config["val_dataset"]["class"] = CountingReads
"""


def test_a_first_start_with_a_debugger_reads_dataset_0_once_for_the_check_and_the_model_report(tiny_config):
    config = load_config(tiny_config(epochs=1, extra=DEBUGGER_ON.format(layer="backbone.layer4") + COUNTING_READS))
    BaseTrainer(config).run()
    assert os.path.isfile(os.path.join(config["work_dir"], MODEL_REPORT_FILE))
    assert config["val_dataset"]["class"].reads.count(0) == 2  # at start-up, then in the validation of epoch 0

def test_a_model_returning_a_tensor_is_stopped_at_its_forward_naming_the_contract(tiny_config):
    path = tiny_config(extra="""
        class TensorCNN(SmallCNN):
            def forward(self, inputs):
                return super().forward(inputs)["logits"]

        config["model"] = {"class": TensorCNN, "args": {"widths": (8, 8, 16, 16)}}
    """)
    result = run_main(path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "TensorCNN.forward takes the inputs dict and returned a Tensor of shape (16, 6)" in result.stderr
    assert "forward(inputs: dict) -> dict" in result.stderr and "{'logits': logits}" in result.stderr
    assert "or take a tensor (forward(self, x)) and Lantern names a tensor output 'logits'" in result.stderr


def test_ranks_that_scored_the_same_idx_are_refused():
    assert merge_rank_buffers([{0: {"a": 1.0}, 2: {"a": 0.0}}, {1: {"a": 1.0}}]) == {
        0: {"a": 1.0}, 1: {"a": 1.0}, 2: {"a": 0.0}}
    with pytest.raises(DatasetContractError, match=r"idx'\]=2 came twice in one evaluation pass \(on ranks 0 and 1\)"):
        merge_rank_buffers([{0: {"a": 1.0}, 2: {"a": 0.0}}, {2: {"a": 1.0}}])


def test_an_idx_repeated_in_a_pass_is_refused_within_and_outside_the_dataset_range():
    seen = SeenIdx(4)
    seen.add_new([0, 3, 7, -1])  # 7 and -1: idx outside range(len(dataset)) are unusual but unique
    seen.add_new([1, 1000])
    assert len(seen) == 6
    for repeated in ([2, 2], [3], [7], [-1], [5, 1000]):
        with pytest.raises(DatasetContractError, match=r"idx'\]=-?\d+ came twice in one evaluation pass"):
            seen.add_new(repeated)


@pytest.mark.parametrize("extra, expected", [
    ("""
        class ScoresCNN(SmallCNN):
            def forward(self, inputs):
                return {"scores": super().forward(inputs)["logits"]}

        config["model"] = {"class": ScoresCNN, "args": {"widths": (8, 8, 16, 16)}}
    """, "CrossEntropyCriterion reads the model's outputs['logits'], but they have the keys ['scores']: set "
         "output_key='scores' in config['criterion']['args'], or return {'logits': ...} from the model's forward (a "
         "plain model's outputs are named by config['model_outputs'])"),
    ("""
        config["criterion"]["args"]["label_key"] = "label"
    """, "CrossEntropyCriterion reads the datapoint's labels['label'], but they have the keys ['class']: set "
         "label_key='class' in config['criterion']['args'], or name it 'label' in the dataset's labels"),
    ("""
        config["metric"]["args"]["output_key"] = "logit"
    """, "ClassificationMetric reads the model's outputs['logit'], but they have the keys ['logits']: set "
         "output_key='logits' in config['metric']['args']"),
], ids=["model_output", "criterion_label", "metric_output"])
def test_a_missing_output_or_label_key_names_the_keys_there_are_and_the_argument(tiny_config, extra, expected):
    result = run_main(tiny_config(epochs=1, extra=extra))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert expected in result.stderr


def test_a_finished_run_with_a_changed_config_is_refused_naming_the_changes(tiny_config):
    work_dir = train(tiny_config("a", epochs=1))
    config = load_config(tiny_config("b", epochs=3))
    config["work_dir"] = work_dir
    config["optimizer"]["args"]["lr"] = 0.1
    with pytest.raises(WorkDirError) as refused:
        BaseTrainer(config).run()
    message = str(refused.value)
    assert "epochs: 1 → 3" in message and "optimizer.args.lr: 0.05 → 0.1" in message
    assert "Set another 'work_dir'" in message and "delete the folder" in message


BOOLEAN_SCORE = """
class WithCorrect(ClassificationMetric):
    HIGHER_IS_BETTER = {**ClassificationMetric.HIGHER_IS_BETTER, "correct": True}

    def __call__(self, outputs, labels):
        scores = super().__call__(outputs, labels)
        return {**scores, "correct": scores["accuracy"] == 1}  # a bool tensor: True/False per datapoint


config["metric"]["class"] = WithCorrect
"""


def test_a_boolean_score_is_written_as_0_and_1_and_read_back(tiny_config):
    work_dir = train(tiny_config(epochs=1, extra=BOOLEAN_SCORE))
    path = os.path.join(work_dir, "epoch_0", "validation_scores.json")
    with open(path) as f:
        written = json.load(f)["per_datapoint"]
    assert all(type(value) is float for value in written["correct"]) and written["correct"] == written["accuracy"]
    assert list(read_scores(path).per_datapoint["correct"]) == written["accuracy"]
    table = EpochTable(os.path.join(work_dir, "epoch_0", EPOCH_TABLE_FILE))
    assert table.values(["correct"])["correct"].tolist() == written["accuracy"]


def test_a_metric_summarizing_to_strings_stops_the_run_naming_the_score(tiny_config):
    config = load_config(tiny_config(epochs=1, extra="""
        class Formatted(ClassificationMetric):
            def summarize(self, buffer=None):
                summary = super().summarize(buffer)
                losses = summary["per_datapoint"]["cross_entropy"]
                summary["per_datapoint"]["cross_entropy"] = [f"{v:.3f}" for v in losses]
                return summary

        config["metric"]["class"] = Formatted
    """))
    with pytest.raises(MetricContractError) as stopped:
        BaseTrainer(config).run()
    assert str(stopped.value).startswith("Formatted.summarize()['per_datapoint']['cross_entropy'] holds a str ('")
    assert "which is not a number" in str(stopped.value) and "values.tolist()" in str(stopped.value)
    assert not os.path.exists(os.path.join(config["work_dir"], "epoch_0", "validation_scores.json"))


def test_a_metric_whose_buffer_is_not_a_dict_by_idx_is_stopped_before_its_first_batch(tiny_config):
    config = load_config(tiny_config(epochs=1, extra="""
        class Listing(ClassificationMetric):
            def reset_buffer(self):
                self.buffer = []

        config["metric"]["class"] = Listing
    """))
    with pytest.raises(MetricContractError, match=r"Listing.buffer is a list of 0 item\(s\) after reset_buffer\(\), "
                                                  r"but the runner reads it as a dict \{idx: "):
        BaseTrainer(config).run()

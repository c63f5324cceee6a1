"""main.py: bad input stops with a message naming the problem and the fix."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.runs import REPO_ROOT, run_main, write_config


def test_missing_config_file(tmp_path):
    result = run_main(tmp_path / "nope.py")
    assert result.returncode == 2
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr


def test_module_without_config(tmp_path):
    path = tmp_path / "empty.py"
    path.write_text("x = 1\n")
    result = run_main(path)
    assert result.returncode == 2 and "must define a dict named 'config'" in result.stderr


def test_entry_that_is_not_class_args(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", extra=(
        "config['model'] = {'class': SmallCNN, 'args': {}, 'kwargs': {}}\n"))
    result = run_main(path)
    assert result.returncode == 2
    assert "config['model']" in result.stderr and "'kwargs'" in result.stderr


def test_unknown_argument_lists_the_accepted_ones(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", extra=(
        "config['model'] = {'class': SmallCNN, 'args': {'num_clases': 6}}\n"))
    result = run_main(path)
    assert result.returncode == 2
    assert "no argument 'num_clases'" in result.stderr and "num_classes" in result.stderr


def test_a_misspelled_top_level_key_stops_the_run_naming_the_closest_one(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", extra="config['debug_disk_budget'] = 1e-6\n")
    result = run_main(path)
    assert result.returncode == 2, result.stderr
    assert "unknown key 'debug_disk_budget' (did you mean 'debug_disk_budget_gb'?)" in result.stderr
    assert not os.path.exists(tmp_path / "w")


@pytest.mark.slow
def test_a_key_only_another_runner_reads_is_said_to_be_ignored(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", val_size=8, extra="""
from runners.evaluators import BaseEvaluator
config["runner"] = BaseEvaluator
config["eval_dataset"] = config.pop("val_dataset")
for key in ("train_dataset", "train_dataloader", "val_dataloader", "criterion", "optimizer", "scheduler", "epochs",
            "checkpoint_method"):
    config.pop(key)
config["debug_disk_budget_gb"] = 1e-6
""")
    result = run_main(path)
    assert result.returncode == 0, result.stderr
    expected = "config key 'debug_disk_budget_gb' is read by BaseTrainer only; BaseEvaluator ignores it: remove it"
    assert expected in open(tmp_path / "w" / "eval.log").read()


def test_missing_runner(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", extra="del config['runner']\n")
    result = run_main(path)
    assert result.returncode == 2 and "config['runner']" in result.stderr


def test_default_work_dirs_of_projects_do_not_collide():
    from runners.config_file import default_work_dir

    lantern = os.path.join(REPO_ROOT, "configs", "examples", "cnn_trainer.py")
    assert default_work_dir(lantern) == os.path.join("logs", "examples", "cnn_trainer")
    assert default_work_dir("/home/me/proj_a/config.py") == os.path.join("logs", "proj_a", "config")
    assert default_work_dir("/home/me/proj_b/config.py") == os.path.join("logs", "proj_b", "config")
    assert default_work_dir("/home/me/proj_a/configs/exp/lr.py") == os.path.join("logs", "proj_a", "exp", "lr")


def _one_error_line(stderr: str) -> str:
    """The run's ``error:`` line; there must be exactly one and no traceback."""
    lines = [line for line in stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.parametrize("returned, problem", [
    ("(dp['inputs']['image'], dp['labels']['class'])", "the dataset returned a tuple of 2 item(s) (a torchvision"),
    ("{**dp, 'meta_info': {'name': 'x'}}", "a datapoint whose meta_info has keys ['name'] but no 'idx'"),
], ids=["tuple", "no_idx"])
def test_a_dataset_breaking_the_datapoint_contract_stops_before_training_in_one_line(tmp_path, returned, problem):
    path = write_config(tmp_path / "c.py", tmp_path / "w", extra=f"""
class Broken(SyntheticShapesDataset):
    def __getitem__(self, i):
        dp = super().__getitem__(i)
        return {returned}
config["train_dataset"]["class"] = Broken
""")
    result = run_main(path)
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert f"config['train_dataset'] (Broken), dataset[0]: {problem}" in line
    assert 'docs/your_project.md "The dataset"' in line and "model report" not in result.stderr


@pytest.mark.slow
def test_a_datapoint_without_idx_met_in_a_dataloader_worker_stops_in_one_line(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=1, extra="""
class Holey(SyntheticShapesDataset):
    def __getitem__(self, i):
        dp = super().__getitem__(i)
        if i == 5:
            del dp["meta_info"]["idx"]
        return dp
config["val_dataset"]["class"] = Holey
config["val_dataloader"]["args"]["num_workers"] = 1
""")
    result = run_main(path)
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert line.startswith("error: a datapoint whose meta_info has keys") and "but no 'idx'" in line
    assert "DataLoader worker" not in line


@pytest.mark.slow
def test_a_repeated_idx_stops_the_run_instead_of_scoring_fewer_datapoints(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=1, extra="""
class Repeating(SyntheticShapesDataset):
    def __getitem__(self, i):
        dp = super().__getitem__(i)
        dp["meta_info"]["idx"] = i % 10
        return dp
config["val_dataset"]["class"] = Repeating
""")
    result = run_main(path)
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result.stderr)
    assert "meta_info['idx']=0 came twice in one evaluation pass" in line
    assert "must be unique per datapoint" in line
    assert not os.path.exists(tmp_path / "w" / "epoch_0" / "validation_scores.json")


@pytest.mark.slow
def test_a_metric_keeping_its_buffer_across_passes_trains_through_every_epoch(tmp_path):
    """A metric's buffer is its own: what reset_buffer keeps (here every idx, overwritten each pass) is not taken
    for an idx repeated by the dataset."""
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=2, train_size=16, val_size=8, extra="""
class KeepingMetric(ClassificationMetric):
    def reset_buffer(self):
        if not hasattr(self, "buffer"):
            self.buffer = {}
config["metric"]["class"] = KeepingMetric
""")
    result = run_main(path)
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "w" / "epoch_1" / "validation_scores.json") as f:
        assert json.load(f)["datapoint_idx"] == list(range(8))




def _stops_in_log(log_path, rank: int = 0, stage: str = "start-up") -> list[str]:
    """The messages of the log's "process N stopped" lines, and asserts the log holds no traceback."""
    with open(log_path, encoding="utf-8") as log:
        text = log.read()
    assert "Traceback" not in text, text
    stop = re.compile(rf"\d\d:\d\d:\d\d \[rank {rank}\] ERROR process \d+ stopped during {stage} \(exit code 2\): (.*)")
    return [match.group(1) for match in map(stop.fullmatch, text.splitlines()) if match]


def test_a_user_error_is_in_the_run_log_once_as_on_stderr(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", extra="""
class Broken(SyntheticShapesDataset):
    def __getitem__(self, i):
        return super().__getitem__(i)["inputs"]
config["val_dataset"]["class"] = Broken
""")
    result = run_main(path)
    assert result.returncode == 2, result.stderr
    message = _one_error_line(result.stderr).removeprefix("error: ")
    assert message.startswith("config['val_dataset'] (Broken), dataset[0]: ")
    assert _stops_in_log(tmp_path / "w" / "train.log") == [message]


@pytest.mark.slow
def test_a_launch_refused_before_its_log_exists_is_in_the_log_of_the_run_it_found(tmp_path):
    """As a warning that this launch changed nothing: the run found may be going on."""
    work_dir = tmp_path / "run"
    assert run_main(write_config(tmp_path / "run.py", work_dir, epochs=1)).returncode == 0
    typo = write_config(tmp_path / "typo.py", work_dir, epochs=1, extra="config['epoch'] = 2\n")
    changed = write_config(tmp_path / "changed.py", work_dir, epochs=2)
    messages = []
    for config_path in (typo, changed):
        result = run_main(config_path)
        assert result.returncode == 2, result.stderr
        messages.append(_one_error_line(result.stderr).removeprefix("error: "))
    assert "unknown key 'epoch'" in messages[0] and "holds another run" in messages[1]
    assert _stops_in_log(work_dir / "train.log") == []
    assert _refusals_in_log(work_dir / "train.log") == messages


def _refusals_in_log(log_path) -> list[str]:
    """The messages of the log's "another launch ... was refused" lines."""
    refused = re.compile(r"\d\d:\d\d:\d\d \[rank 0\] WARNING another launch \(process \d+\) into this work dir "
                         r"was refused and changed nothing here \(exit code 2\): (.*)")
    with open(log_path, encoding="utf-8") as log:
        return [match.group(1) for match in map(refused.fullmatch, log.read().splitlines()) if match]


def test_a_folder_that_holds_no_run_gets_nothing_in_its_log(tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "train.log").write_text("another tool's log\n")
    result = run_main(write_config(tmp_path / "c.py", tmp_path / "w"))
    assert result.returncode == 2 and "it is not a Lantern run" in result.stderr
    assert (tmp_path / "w" / "train.log").read_text() == "another tool's log\n"

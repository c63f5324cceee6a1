"""SIGKILL a real run at precise points, start the same command again: it resumes and completes.

Each fault is injected by the test's own config code (the user's side of Lantern), never by a hook in
the library: a criterion, metric or write function (page, scores, checkpoint) that SIGKILLs its own
process when it reaches its point. A marker file per point makes each run die at the next point only,
so one run killed five times in a row covers every point for the price of six starts.
"""

from __future__ import annotations

import glob
import os
import signal

import numpy as np
import pytest
import torch

from debuggers.pages.file_format import PAGE_GLOB, is_own_file, load_page
from debuggers.pages.index import read_index
from run_dir.names import REMOVED_MARKER
from runners.config_file import load_config
from runners.eval_viewer.backend.initialization import load_debug_outputs
from runners.trainers import BaseTrainer
from tests.runs import run_main, run_torchrun, write_config
from utils.atomic_files import read_json

pytestmark = pytest.mark.slow  # runs in .ci/run's second command (README: the slow tests)

EPOCHS, VAL_SIZE = 2, 24
POINTS = ["training_step", "validation", "page_write", "score_write", "checkpoint_save"]
LEAVES_A_HALF_WRITTEN_FILE = {"page_write", "score_write", "checkpoint_save"}

DEBUGGER = """
import json
import os
import signal
import threading
import time

from debuggers.forward_debugger import ForwardDebugger


class Features(ForwardDebugger):
    def process_forward(self, module, input, output):
        return {"features": output.detach()}


config["debugger"] = {"class": SequentialDebugger, "args": {"page_size_mb": 0.004, "debuggers_config": [
    {"name": "features", "debugger_config": {"class": Features, "args": {"layer_name": "backbone.layer1"}}},
]}}
"""

KILL = '''
PROGRESS = os.path.join(config["work_dir"], "progress.json")
calls_in_epoch_1 = {"criterion": 0, "metric": 0, "pages": 0}


def in_epoch_1():
    if not os.path.exists(PROGRESS):
        return False
    with open(PROGRESS) as f:
        return json.load(f)["completed_epochs"] == 1


claimed = []  # the point this process dies at
claim_lock = threading.Lock()


def my_turn(point):
    """True at the first point of POINTS not killed at yet (and marks it): each run dies at the next point.

    One point per process: the page writer's thread must not claim the next point while the main thread,
    which has just claimed its own, is killing the process."""
    with claim_lock:
        if claimed or next((p for p in POINTS if not os.path.exists(os.path.join(MARKERS, p))), None) != point:
            return False
        claimed.append(point)
        open(os.path.join(MARKERS, point), "w").close()
        return True


def die():
    os.kill(os.getpid(), signal.SIGKILL)
'''

INJECTIONS = """
class KillingCriterion(CrossEntropyCriterion):
    def __call__(self, outputs, labels):
        if in_epoch_1():
            calls_in_epoch_1["criterion"] += 1
            if calls_in_epoch_1["criterion"] == 2 and my_turn("training_step"):
                die()
        return super().__call__(outputs, labels)


class KillingMetric(ClassificationMetric):
    def __call__(self, outputs, labels):
        if in_epoch_1():
            calls_in_epoch_1["metric"] += 1
            if calls_in_epoch_1["metric"] == 2 and my_turn("validation"):  # batch 1's pages are on disk
                die()
        return super().__call__(outputs, labels)


config["criterion"] = {"class": KillingCriterion, "args": {}}
config["metric"] = {"class": KillingMetric, "args": {}}

from debuggers.pages import file_format as page_format

_append = page_format._append


def append_half_then_die(file, buffers):
    _append(file, buffers)
    if "epoch_1" in file.name:
        calls_in_epoch_1["pages"] += 1
        if calls_in_epoch_1["pages"] == 3 and my_turn("page_write"):
            os.truncate(file.name, os.path.getsize(file.name) // 2)
            die()


page_format._append = append_half_then_die

_json_dump = json.dump


def dump_scores_half_then_die(obj, fp, *args, **kwargs):
    name = str(getattr(fp, "name", ""))
    if "epoch_1" in name and ".validation_scores.json" in name and my_turn("score_write"):
        fp.write(json.dumps(obj)[:100])
        fp.flush()
        die()
    _json_dump(obj, fp, *args, **kwargs)


json.dump = dump_scores_half_then_die

_save = torch.save


def save_checkpoint_half_then_die(obj, f, *args, **kwargs):
    _save(obj, f, *args, **kwargs)
    if isinstance(f, str) and "epoch_1" in f and ".checkpoint.pt" in f and my_turn("checkpoint_save"):
        os.truncate(f, os.path.getsize(f) // 2)
        die()


torch.save = save_checkpoint_half_then_die
"""

RANK_1_DIES_WHILE_WRITING_PAGES = """
from debuggers.pages import file_format as page_format

_append = page_format._append


def die_on_rank_1(file, buffers):
    if os.environ.get("RANK") == "1" and "epoch_0" in file.name and my_turn("rank_1_page_flush"):
        time.sleep(3)  # rank 0 has written its own pages meanwhile: it must not mark epoch 0 done
        die()
    _append(file, buffers)


page_format._append = die_on_rank_1
config["debugger"]["args"]["page_size_mb"] = 100  # rank 1 writes its only page in the final flush
"""


def config_file(tmp_path, name, extra="", points=(), **options):
    options = {"epochs": EPOCHS, "checkpoint_method": "all", "val_size": VAL_SIZE, **options}
    markers = tmp_path / f"{name}.killed"
    markers.mkdir()
    constants = f"POINTS = {list(points)!r}\nMARKERS = {str(markers)!r}\n"
    return write_config(tmp_path / f"{name}.py", tmp_path / name, extra=DEBUGGER + constants + KILL + extra,
                        **options)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same run, never killed."""
    config = load_config(config_file(tmp_path_factory.mktemp("reference"), "reference"))
    BaseTrainer(config).run()
    return config["work_dir"]


def hidden_temporaries(work_dir):
    return [os.path.join(root, name) for root, _, names in os.walk(work_dir) for name in names if ".tmp-" in name]


def is_page_writer_temporary(path, work_dir):
    """A page, index or locations file of epoch 1 not yet moved into place: the writer thread was killed
    while writing it."""
    folder, name = os.path.split(path)
    return folder == os.path.join(work_dir, "epoch_1", "debugger") and is_own_file(name, rank=0, world_size=1)


def assert_pages_hold_every_idx_once(debugger_dir, val_size=VAL_SIZE):
    indexes = [read_index(path) for path in glob.glob(os.path.join(debugger_dir, "index*.json"))]
    assert indexes and all(index["complete"] for index in indexes)
    seen = [idx for path in glob.glob(os.path.join(debugger_dir, PAGE_GLOB)) for idx in load_page(path)]
    assert sorted(seen) == list(range(val_size)), f"an idx is missing or duplicated in {debugger_dir}"


def assert_same_as_reference(work_dir, reference):
    """Every epoch complete, loadable and equal to the uninterrupted run; no debris left anywhere."""
    assert read_json(os.path.join(work_dir, "progress.json"))["completed_epochs"] == EPOCHS
    assert hidden_temporaries(work_dir) == []
    for epoch in range(EPOCHS):
        path, expected_path = os.path.join(work_dir, f"epoch_{epoch}"), os.path.join(reference, f"epoch_{epoch}")
        ours, theirs = (read_json(os.path.join(p, "validation_scores.json")) for p in (path, expected_path))
        assert ours["datapoint_idx"] == list(range(VAL_SIZE))
        for name, values in ours["per_datapoint"].items():
            assert values == pytest.approx(theirs["per_datapoint"][name], rel=1e-5, abs=1e-6), (epoch, name)
        state = torch.load(os.path.join(path, "checkpoint.pt"), weights_only=True)["model_state_dict"]
        expected = torch.load(os.path.join(expected_path, "checkpoint.pt"), weights_only=True)["model_state_dict"]
        for key, value in expected.items():
            torch.testing.assert_close(state[key], value, rtol=1e-5, atol=1e-6)
        assert_pages_hold_every_idx_once(os.path.join(path, "debugger"))
        outputs, expected_outputs = load_debug_outputs(path), load_debug_outputs(expected_path)
        for idx in range(VAL_SIZE):
            np.testing.assert_allclose(outputs[idx]["features"]["features"],
                                       expected_outputs[idx]["features"]["features"], rtol=1e-5, atol=1e-6)


@pytest.mark.timeout(300)
def test_run_killed_at_each_point_resumes_and_completes(tmp_path, reference):
    config_path = config_file(tmp_path, "killed", INJECTIONS, points=POINTS)
    work_dir = str(tmp_path / "killed")
    epoch_0_checkpoint = os.path.join(work_dir, "epoch_0", "checkpoint.pt")
    for point in POINTS:
        killed = run_main(config_path, timeout=90)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
        assert os.path.exists(tmp_path / "killed.killed" / point), f"the run did not die at {point}"
        assert read_json(os.path.join(work_dir, "progress.json"))["completed_epochs"] == 1, point
        temporaries = hidden_temporaries(work_dir)
        if point in LEAVES_A_HALF_WRITTEN_FILE:
            assert temporaries, point
        else:  # at most what the page writer of epoch 1 was writing (a page, or the index after one)
            assert all(is_page_writer_temporary(path, work_dir) for path in temporaries), (point, temporaries)
        assert_pages_hold_every_idx_once(os.path.join(work_dir, "epoch_0", "debugger"))
        if point == POINTS[0]:
            written = os.stat(epoch_0_checkpoint).st_mtime_ns

    resumed = run_main(config_path, timeout=90)
    assert resumed.returncode == 0, resumed.stderr
    assert open(os.path.join(work_dir, "train.log")).read().count("Resuming after epoch 0") == len(POINTS)
    assert os.stat(epoch_0_checkpoint).st_mtime_ns == written, "the finished epoch 0 was redone"
    assert_same_as_reference(work_dir, reference)


@pytest.mark.timeout(150)
def test_ddp_rank_killed_while_writing_pages_redoes_the_epoch(tmp_path):
    config_path = config_file(tmp_path, "ddp", RANK_1_DIES_WHILE_WRITING_PAGES, points=["rank_1_page_flush"],
                              val_size=25, val_batch=4, train_size=40)
    work_dir = str(tmp_path / "ddp")
    killed = run_torchrun(config_path)
    assert killed.returncode != 0, killed.stdout
    assert os.path.exists(tmp_path / "ddp.killed" / "rank_1_page_flush"), "rank 1 did not die where intended"
    assert not os.path.exists(os.path.join(work_dir, "progress.json")), "epoch 0 was marked done without its pages"

    resumed = run_torchrun(config_path)
    assert resumed.returncode == 0, resumed.stdout
    assert read_json(os.path.join(work_dir, "progress.json"))["completed_epochs"] == EPOCHS
    for epoch in range(EPOCHS):
        assert_pages_hold_every_idx_once(os.path.join(work_dir, f"epoch_{epoch}", "debugger"), val_size=25)
    assert hidden_temporaries(work_dir) == []


BUDGET_KILLS = """
config["debug_disk_budget_gb"] = 1e-9  # smaller than one epoch: only the latest finished epoch's outputs stay

from debuggers.pages import file_format as page_format

_append = page_format._append
pages_in_epoch_2 = []


def append_then_die(file, buffers):
    _append(file, buffers)
    if "epoch_2" in file.name:
        pages_in_epoch_2.append(file.name)
        if len(pages_in_epoch_2) == 2 and my_turn("page_write"):  # a part of epoch 2's pages on disk
            die()


page_format._append = append_then_die


def in_epoch_2():
    return os.path.exists(PROGRESS) and json.load(open(PROGRESS))["completed_epochs"] == 2


class KillingCriterion(CrossEntropyCriterion):
    def __call__(self, outputs, labels):
        if in_epoch_2() and my_turn("training_step"):  # after the start-up budget pass
            die()
        return super().__call__(outputs, labels)


config["criterion"] = {"class": KillingCriterion, "args": {}}
"""


@pytest.mark.timeout(200)
def test_a_kill_while_an_epoch_writes_its_pages_keeps_the_latest_finished_epochs_outputs(tmp_path):
    """The budget pass at start-up must not count the killed epoch's half-written pages as the latest epoch."""
    config_path = config_file(tmp_path, "budget", BUDGET_KILLS, points=["page_write", "training_step"], epochs=3)
    work_dir = str(tmp_path / "budget")
    for point in ("page_write", "training_step"):
        killed = run_main(config_path, timeout=90)
        assert killed.returncode == -signal.SIGKILL, (point, killed.stderr)
        assert os.path.exists(tmp_path / "budget.killed" / point), f"the run did not die at {point}"
        assert read_json(os.path.join(work_dir, "progress.json"))["completed_epochs"] == 2, point
        assert_pages_hold_every_idx_once(os.path.join(work_dir, "epoch_1", "debugger"))
        assert not os.path.exists(os.path.join(work_dir, "epoch_1", REMOVED_MARKER)), point

    resumed = run_main(config_path, timeout=90)
    assert resumed.returncode == 0, resumed.stderr
    assert [os.path.isdir(os.path.join(work_dir, f"epoch_{epoch}", "debugger")) for epoch in range(3)] == \
        [False, False, True]
    assert_pages_hold_every_idx_once(os.path.join(work_dir, "epoch_2", "debugger"))

"""Faults injected into real runs: each ends in a clear error or is recorded as the design says, never a hang,
and nothing written before is lost (earlier epochs' pages, scores and checkpoints still load).

The design (docs/reliability.md): a failing debugger or a failed page write is recorded and training goes on,
unless the debugger is ``strict``; a file Lantern needs to resume (scores, checkpoint, progress) that cannot be
written stops the run with a ``WorkDirError`` saying what to do, and the same command then resumes.
Unit-level checks of the same faults live in tests/debuggers/; here they go through ``BaseTrainer`` runs.
"""

from __future__ import annotations

import glob
import json
import math
import os
import pickle
import resource
import shutil
import signal
import subprocess

import numpy as np
import pytest
import torch

from debuggers.pages.file_format import PAGE_GLOB, CorruptPageError, UnsafePageError, load_page
from debuggers.pages.index import read_index
from debuggers.pages.writer import WriterThreadError
from debuggers.wrappers.sequential_debugger import DebuggerError
from runners.eval_viewer.backend.initialization import load_debug_outputs
from tests.runs import run_main, train, write_config
from utils.atomic_files import read_json
from utils.errors import CheckpointError, ConfigError, WorkDirError

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]

VAL_SIZE = 12

COMMON = """
import os

from debuggers.base_debugger import BaseDebugger
from debuggers.forward_debugger import ForwardDebugger

PROGRESS = os.path.join(config["work_dir"], "progress.json")


def in_epoch_1():
    if not os.path.exists(PROGRESS):
        return False
    with open(PROGRESS) as f:
        return json.load(f)["completed_epochs"] == 1


class Features(ForwardDebugger):
    def process_forward(self, module, input, output):
        return {"features": output.detach()}


config["debugger"] = {"class": SequentialDebugger, "args": {"page_size_mb": 0.004, "debuggers_config": [
    {"name": "features", "debugger_config": {"class": Features, "args": {"layer_name": "backbone.layer1"}}},
]}}


def add_debugger(name, cls, **args):
    config["debugger"]["args"]["debuggers_config"].append(
        {"name": name, "debugger_config": {"class": cls, "args": args}})
"""


def config_file(tmp_path, name, extra="", work_dir=None, **options):
    options = {"epochs": 2, "checkpoint_method": "all", "train_size": 32, "val_size": VAL_SIZE, "val_batch": 4,
               **options}
    return write_config(tmp_path / f"{name}.py", work_dir or tmp_path / name,
                        extra="import json\n" + COMMON + extra, **options)


def strict_json(path):
    """Parse as strict JSON: NaN or Infinity in the file fails."""
    def refuse(constant):
        raise ValueError(f"{path} holds {constant}, which is not JSON")

    with open(path) as f:
        return json.load(f, parse_constant=refuse)


def completed_epochs(work_dir):
    return read_json(os.path.join(work_dir, "progress.json"))["completed_epochs"]


def assert_epoch_intact(work_dir, epoch):
    """The epoch's scores, checkpoint and every idx of its debug pages load."""
    epoch_dir = os.path.join(work_dir, f"epoch_{epoch}")
    assert strict_json(os.path.join(epoch_dir, "validation_scores.json"))["datapoint_idx"] == list(range(VAL_SIZE))
    torch.load(os.path.join(epoch_dir, "checkpoint.pt"), weights_only=True)
    outputs = load_debug_outputs(epoch_dir)
    assert outputs.complete and list(outputs) == list(range(VAL_SIZE))
    for idx in outputs:
        assert outputs[idx]["features"]["features"].shape == (8, 8, 8)
    seen = [i for page in glob.glob(os.path.join(epoch_dir, "debugger", PAGE_GLOB)) for i in load_page(page)]
    assert sorted(seen) == list(range(VAL_SIZE))


def hidden_temporaries(work_dir):
    return [os.path.join(root, name) for root, _, names in os.walk(work_dir) for name in names if ".tmp-" in name]


def debugger_index(work_dir, epoch):
    return read_index(os.path.join(work_dir, f"epoch_{epoch}", "debugger", "index.json"))


def log_of(work_dir):
    with open(os.path.join(work_dir, "train.log")) as f:
        return f.read()


# ------------------------------------------------------------------ full disk
@pytest.fixture
def small_disk(tmp_path):
    """A real 2 MB filesystem (tmpfs) that fills up; skipped where mounting is not permitted."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot create a small filesystem (the RLIMIT_FSIZE test still runs)")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                            capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        pytest.skip(f"mounting a small tmpfs is not permitted here ({result.stderr.strip()}); needs root in a "
                    "container that allows mounts (the RLIMIT_FSIZE test still runs)")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=30)


FILLS_THE_DISK = """
class FillsTheDisk(BaseDebugger):
    '''Another program fills the disk during epoch 1's validation (once).'''

    def __call__(self, datapoint, model):
        if in_epoch_1() and not os.path.exists(FILLED):
            open(FILLED, "w").close()
            try:
                with open(BALLAST, "wb", buffering=0) as f:
                    while f.write(bytes(1 << 16)):
                        pass
            except OSError:
                pass
        return datapoint["outputs"]["logits"]


add_debugger("fills_the_disk", FillsTheDisk)
"""


def test_full_disk_stops_the_run_clearly_and_the_same_command_resumes(tmp_path, small_disk):
    ballast, filled = small_disk / "ballast", tmp_path / "filled"
    config_path = config_file(tmp_path, "full", f"BALLAST = {str(ballast)!r}\nFILLED = {str(filled)!r}\n"
                              + FILLS_THE_DISK, work_dir=small_disk / "run")
    with pytest.raises(WorkDirError, match=r"cannot write .*epoch_1.*No space left on device.*run the same command"):
        train(config_path)
    work_dir = str(small_disk / "run")
    assert completed_epochs(work_dir) == 1
    assert_epoch_intact(work_dir, 0)
    assert hidden_temporaries(work_dir) == []

    os.remove(ballast)
    train(config_path)
    assert completed_epochs(work_dir) == 2
    assert_epoch_intact(work_dir, 1)


BIG_OUTPUTS_IN_EPOCH_1 = """
class BigInEpoch1(BaseDebugger):
    def __call__(self, datapoint, model):
        size = 1 << 16 if in_epoch_1() else 4  # 256 KB per datapoint in epoch 1
        return torch.zeros(len(datapoint["meta_info"]["idx"]), size)


add_debugger("big", BigInEpoch1)
config["debugger"]["args"]["page_size_mb"] = 1
"""
FILE_SIZE_LIMIT = 512 * 1024  # above every checkpoint, score and log file, below a 1 MB page


def limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead of killing


@pytest.mark.timeout(120)
def test_page_writes_failing_with_efbig_are_recorded_and_training_completes(tmp_path):
    config_path = config_file(tmp_path, "efbig", BIG_OUTPUTS_IN_EPOCH_1)
    result = run_main(config_path, timeout=100, preexec_fn=limit_file_size)
    assert result.returncode == 0, result.stderr
    work_dir = str(tmp_path / "efbig")
    assert completed_epochs(work_dir) == 2
    assert_epoch_intact(work_dir, 0)
    assert "epoch_1/debugger cannot be written" in log_of(work_dir) and "File too large" in log_of(work_dir)
    assert debugger_index(work_dir, 1)["complete"] is False
    assert strict_json(f"{work_dir}/epoch_1/validation_scores.json")["datapoint_idx"] == list(range(VAL_SIZE))
    torch.load(f"{work_dir}/epoch_1/checkpoint.pt", weights_only=True)
    assert hidden_temporaries(work_dir) == []


# ------------------------------------------------------------ unwritable folders
def test_file_where_the_work_dir_should_be_is_refused_clearly(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    with pytest.raises(WorkDirError, match=r"cannot write .*blocker.*Not a directory"):
        train(config_file(tmp_path, "blocked", work_dir=blocker / "run"))


FOLDER_BECOMES_A_FILE = """
class ReplacesItsFolder(BaseDebugger):
    '''At epoch 1's first batch, its page folder is replaced by a file: later page writes cannot succeed.'''

    def __call__(self, datapoint, model):
        folder = os.path.join(config["work_dir"], "epoch_1", "debugger")
        if in_epoch_1() and os.path.isdir(folder):
            shutil.rmtree(folder)
            open(folder, "w").close()
        return datapoint["outputs"]["logits"]


import shutil

add_debugger("replaces_its_folder", ReplacesItsFolder)
config["debugger"]["args"]["strict"] = STRICT
"""


@pytest.mark.parametrize("strict", [False, True])
def test_page_folder_replaced_by_a_file_mid_epoch(tmp_path, strict):
    config_path = config_file(tmp_path, "replaced", f"STRICT = {strict}\n" + FOLDER_BECOMES_A_FILE)
    work_dir = str(tmp_path / "replaced")
    if strict:
        with pytest.raises(WriterThreadError, match="epoch_1/debugger"):
            train(config_path)
        assert completed_epochs(work_dir) == 1
    else:
        train(config_path)
        assert completed_epochs(work_dir) == 2
        assert "/debugger cannot be written" in log_of(work_dir)
        assert strict_json(f"{work_dir}/epoch_1/validation_scores.json")["datapoint_idx"] == list(range(VAL_SIZE))
    assert_epoch_intact(work_dir, 0)
    assert hidden_temporaries(work_dir) == []


# ------------------------------------------------------------- failing debuggers
FLAKY = """
class Flaky(BaseDebugger):
    '''Raises on every batch holding datapoint 5, in epoch 1 only.'''

    def __call__(self, datapoint, model):
        if in_epoch_1() and 5 in datapoint["meta_info"]["idx"].tolist():
            raise RuntimeError("planted failure on datapoint 5")
        return datapoint["outputs"]["logits"]


add_debugger("flaky", Flaky)
config["debugger"]["args"]["strict"] = STRICT
"""


def test_debugger_raising_on_some_datapoints_is_recorded_and_training_continues(tmp_path):
    work_dir = train(config_file(tmp_path, "flaky", "STRICT = False\n" + FLAKY))
    assert completed_epochs(work_dir) == 2
    outputs = load_debug_outputs(os.path.join(work_dir, "epoch_1"))
    assert outputs.complete and list(outputs) == list(range(VAL_SIZE))
    failed = [idx for idx in outputs if isinstance(outputs[idx]["flaky"], dict)]
    assert failed == [4, 5, 6, 7]  # the batch holding datapoint 5
    assert outputs[5]["flaky"]["kind"] == "error" and outputs[5]["flaky"]["message"] == "planted failure on datapoint 5"
    assert all(outputs[idx]["features"]["features"].shape == (8, 8, 8) for idx in failed)
    assert outputs[0]["flaky"].shape == (6,)
    assert log_of(work_dir).count("debugger 'flaky' failed") == 1
    assert_epoch_intact(work_dir, 0)


def test_strict_debugger_failure_stops_the_run_and_keeps_earlier_epochs(tmp_path):
    config_path = config_file(tmp_path, "strict", "STRICT = True\n" + FLAKY)
    with pytest.raises(DebuggerError, match="debugger 'flaky' failed: RuntimeError: planted failure on datapoint 5"):
        train(config_path)
    work_dir = str(tmp_path / "strict")
    assert completed_epochs(work_dir) == 1
    assert_epoch_intact(work_dir, 0)


UNSERIALISABLE = """
class ReturnsAnObject(BaseDebugger):
    def __call__(self, datapoint, model):
        return {"handle": object()} if in_epoch_1() else {"fine": 1.0}


add_debugger("returns_an_object", ReturnsAnObject)
config["debugger"]["args"]["strict"] = STRICT
"""


@pytest.mark.parametrize("strict", [False, True])
def test_output_that_cannot_be_serialised(tmp_path, strict):
    config_path = config_file(tmp_path, "unserialisable", f"STRICT = {strict}\n" + UNSERIALISABLE)
    work_dir = str(tmp_path / "unserialisable")
    if strict:
        with pytest.raises(DebuggerError) as caught:
            train(config_path)
        assert "debug output at 'returns_an_object.handle' is a builtins.object" in str(caught.value)
        assert completed_epochs(work_dir) == 1
    else:
        train(config_path)
        assert completed_epochs(work_dir) == 2
        log = log_of(work_dir)
        assert "debugger 'returns_an_object' failed (UnsupportedOutputError" in log
        assert "debug output at 'returns_an_object.handle'" in log
        assert debugger_index(work_dir, 1)["complete"] is True
        outputs = load_debug_outputs(os.path.join(work_dir, "epoch_1"))
        for idx in outputs:
            assert outputs[idx]["returns_an_object"]["kind"] == "error"
            assert set(outputs[idx]) > {"returns_an_object"}, "the other debuggers' outputs are kept"
    assert_epoch_intact(work_dir, 0)


# ---------------------------------------------------------- damaged run files
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    return train(config_file(tmp_path_factory.mktemp("finished"), "finished"))


class PlantsAMarker:
    """Unpickling it would create ``path``: a stand-in for any code a malicious pickle runs."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def test_damaged_pages_of_a_real_run_are_refused_and_the_rest_still_loads(finished_run, tmp_path):
    epoch_dir = tmp_path / "epoch_1"
    shutil.copytree(os.path.join(finished_run, "epoch_1"), epoch_dir)
    debugger_dir = epoch_dir / "debugger"
    locations = load_debug_outputs(str(epoch_dir)).locations
    pages = sorted(set(locations.values()))
    truncated, garbage, malicious = pages[:3]
    marker = tmp_path / "executed"
    (debugger_dir / truncated).write_bytes((debugger_dir / truncated).read_bytes()[:200])
    (debugger_dir / garbage).write_bytes(os.urandom(2000))
    (debugger_dir / malicious).write_bytes(pickle.dumps({0: {"x": PlantsAMarker(str(marker))}}))

    outputs = load_debug_outputs(str(epoch_dir))
    expected = {truncated: CorruptPageError, garbage: CorruptPageError, malicious: CorruptPageError}
    for idx in outputs:
        page = locations[idx]
        if page in expected:
            with pytest.raises(expected[page], match=page):
                outputs[idx]
        else:
            assert outputs[idx]["features"]["features"].shape == (8, 8, 8)
    assert not marker.exists()

    (debugger_dir / "page_99.pkl").write_bytes(pickle.dumps({99: {"x": PlantsAMarker(str(marker))}}))
    assert len(load_debug_outputs(str(epoch_dir))) == VAL_SIZE  # a complete epoch ignores unindexed files
    index = read_index(str(debugger_dir / "index.json"))
    (debugger_dir / "index.json").write_text(json.dumps({**index, "complete": False}))
    outputs = load_debug_outputs(str(epoch_dir))  # an incomplete one opens them to recover them: refused
    assert [type(error) for error in outputs.errors] == [CorruptPageError] and "page_99.pkl" in str(outputs.errors[0])
    assert len(outputs) == VAL_SIZE and 99 not in outputs
    assert not marker.exists()
    with pytest.raises(UnsafePageError, match="page_99.pkl"):  # a format-1 page loaded on its own: refused
        load_page(str(debugger_dir / "page_99.pkl"))
    assert not marker.exists()


CRASHES_IN_EPOCH_1 = """
class CrashingCriterion(CrossEntropyCriterion):
    def __call__(self, outputs, labels):
        if in_epoch_1():
            raise RuntimeError("planted crash in epoch 1")
        return super().__call__(outputs, labels)


config["criterion"] = {"class": CrashingCriterion, "args": {}}
"""


def test_damaged_checkpoint_or_progress_file_stops_the_resume_clearly(tmp_path):
    config_path = config_file(tmp_path, "crashed", CRASHES_IN_EPOCH_1)
    with pytest.raises(RuntimeError, match="planted crash"):
        train(config_path)
    work_dir = str(tmp_path / "crashed")
    checkpoint = os.path.join(work_dir, "epoch_0", "checkpoint.pt")
    progress = os.path.join(work_dir, "progress.json")
    original = open(checkpoint, "rb").read()
    marker = tmp_path / "executed"

    open(checkpoint, "wb").write(original[: len(original) // 2])
    with pytest.raises(CheckpointError, match=r"epoch_0/checkpoint.pt' cannot be read .* truncated"):
        train(config_path)
    torch.save({"model_state_dict": PlantsAMarker(str(marker))}, checkpoint)
    with pytest.raises(CheckpointError, match="epoch_0/checkpoint.pt' cannot be read"):
        train(config_path)
    assert not marker.exists()
    open(checkpoint, "wb").write(original)
    open(progress, "w").write('{"completed_epochs": ')
    with pytest.raises(CheckpointError, match="progress.json is not a Lantern progress file"):
        train(config_path)


# ------------------------------------------------------------------------ NaN
NAN_INPUTS = """
from data.datasets import SyntheticShapesDataset


class NaNAt3(SyntheticShapesDataset):
    def __getitem__(self, idx):
        datapoint = super().__getitem__(idx)
        if idx == 3:
            datapoint["inputs"]["image"][:] = float("nan")
        return datapoint


config[NAN_SPLIT]["class"] = NaNAt3
config["best_metric"] = "cross_entropy"
"""


def test_nan_validation_input_is_recorded_for_its_datapoint_only(tmp_path):
    work_dir = train(config_file(tmp_path, "nan_val", "NAN_SPLIT = 'val_dataset'\n" + NAN_INPUTS))
    for epoch in range(2):
        scores = strict_json(os.path.join(work_dir, f"epoch_{epoch}", "validation_scores.json"))
        cross_entropy = scores["per_datapoint"]["cross_entropy"]
        assert cross_entropy[3] is None and all(math.isfinite(v) for i, v in enumerate(cross_entropy) if i != 3)
        assert scores["aggregated"]["cross_entropy"] is None
        outputs = load_debug_outputs(os.path.join(work_dir, f"epoch_{epoch}"))
        assert np.isnan(outputs[3]["features"]["features"]).all()
        assert all(np.isfinite(outputs[i]["features"]["features"]).all() for i in outputs if i != 3)
    progress = strict_json(os.path.join(work_dir, "progress.json"))
    assert progress["completed_epochs"] == 2 and progress["best_epoch"] is None  # a NaN epoch is never the best


def test_nan_training_input_poisons_the_model_but_the_run_completes_with_valid_files(tmp_path):
    work_dir = train(config_file(tmp_path, "nan_train", "NAN_SPLIT = 'train_dataset'\n" + NAN_INPUTS))
    assert strict_json(os.path.join(work_dir, "progress.json"))["completed_epochs"] == 2
    scores = strict_json(os.path.join(work_dir, "epoch_1", "validation_scores.json"))
    assert scores["per_datapoint"]["cross_entropy"] == [None] * VAL_SIZE
    assert torch.load(os.path.join(work_dir, "epoch_1", "training_losses.pt")).isnan().all()
    assert list(load_debug_outputs(os.path.join(work_dir, "epoch_1"))) == list(range(VAL_SIZE))


# ------------------------------------------------------------- bad configs
DEBUGGERS = "config['debugger']['args']['debuggers_config']"


@pytest.mark.parametrize("extra, message", [
    (f"{DEBUGGERS}[0]['debugger_config']['args']['layer_name'] = 'backbone.layr1'",
     r"no layer 'backbone.layr1'; closest existing names: \['backbone.layer1'"),
    (f"{DEBUGGERS} *= 2", "duplicate debugger name 'features'"),
    ("config['debugger']['args']['page_size_mb'] = 0", "page_size_mb must be a positive number"),
    ("config['debugger']['args']['page_size_mb'] = -5", "page_size_mb must be a positive number"),
    ("config['debugger']['args']['page_size_mb'] = float('nan')", "page_size_mb must be a positive number"),
    ("config['debugger']['args']['page_size_mb'] = '100'", "page_size_mb must be a positive number"),
    ("config['debugger']['args']['direct_io'] = 'no'", "direct_io must be True or False, got 'no'"),
    ("config['debugger']['args']['summaries_every_epoch'] = 1", "summaries_every_epoch must be True or False"),
    (f"{DEBUGGERS} = {{'name': 'features'}}", "debuggers_config must be a list"),
    (f"config['debugger'] = {DEBUGGERS}[0]['debugger_config']", "must build a SequentialDebugger"),
    (f"{DEBUGGERS}[0]['debugger_config'] = {{'class': torch.nn.ReLU, 'args': {{}}}}", "not a BaseDebugger"),
    ("config['distributed_timeout_s'] = '30'", "distributed_timeout_s'] must be a positive number"),
    ("config['epochs'] = '2'", r"config\['epochs'\] must be a positive whole number"),
])
def test_bad_config_stops_the_run_before_training(tmp_path, extra, message):
    with pytest.raises(ConfigError, match=message):
        train(config_file(tmp_path, "bad", extra))
    assert not glob.glob(str(tmp_path / "bad" / "epoch_*"))


def test_page_of_one_byte_gives_one_page_per_datapoint(tmp_path):
    work_dir = train(config_file(tmp_path, "tiny_pages", "config['debugger']['args']['page_size_mb'] = 1e-6\n",
                                 epochs=1))
    assert debugger_index(work_dir, 0)["pages"] == VAL_SIZE
    assert_epoch_intact(work_dir, 0)

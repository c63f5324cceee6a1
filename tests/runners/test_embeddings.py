"""``python -m runners.embeddings`` on a real trained run: every feature space of the epoch mapped and stored in its
folder (the captured layer's vectors pooled as the failure analysis pools them, checked against the raw pages'
means), a space the epoch has not named with the ones it has, a stored map read only while the epoch is as it was,
and a stored map that is not one Lantern wrote refused, naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.epoch_table import EpochTable
from debuggers.pages.reader import load_debug_outputs
from run_dir import RunDir
from run_dir.embedding_file import ABOUT_KEY, FORMAT, EmbeddingMap, embedding_path, read_embedding, write_embedding
from run_dir.errors import RunFileError
from run_dir.findings_file import outputs_signature
from tests.runs import REPO_ROOT, one_thread, train, write_config

pytestmark = pytest.mark.timeout(600)

LAYER_OUTPUT = """
from debuggers.layer_output_debugger import LayerOutputDebugger
config["debugger"] = {"class": SequentialDebugger, "args": {"page_size_mb": 4, "debuggers_config": [
    {"name": "features",
     "debugger_config": {"class": LayerOutputDebugger, "args": {"layer_name": "backbone.layer3"}}}]}}
"""


@pytest.fixture(scope="module")
def epoch_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("embeddings")
    with one_thread():
        run = train(write_config(root / "mapped.py", root / "logs" / "mapped", epochs=1, train_size=32, val_size=40,
                                 extra=LAYER_OUTPUT))
    return RunDir(run).epoch_dir()


def command(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runners.embeddings", *arguments], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_every_space_of_the_epoch_is_mapped_and_stored_in_its_folder(epoch_dir):
    done = command("--run", epoch_dir, "--method", "pca")
    assert done.returncode == 0, done.stderr
    assert [line.split(":")[0] for line in done.stdout.splitlines()] == ["debugger", "summaries", "probabilities"]
    signature = outputs_signature(epoch_dir)
    pages = load_debug_outputs(epoch_dir)
    pooled = {idx: np.asarray(pages[idx]["features"]["output"], dtype=np.float64).mean(axis=(1, 2)) for idx in pages}
    found = read_embedding(embedding_path(epoch_dir, "debugger:features"), "debugger:features", signature)
    assert found is not None and found.about["method"] == "pca"
    assert found.idx.tolist() == sorted(pooled) and found.about["dims"] == len(pooled[0])
    vectors = np.stack([pooled[i] for i in sorted(pooled)])
    centred = vectors - vectors.mean(axis=0)
    first_axis = np.linalg.svd(centred, full_matrices=False)[2][0]
    expected = centred @ first_axis
    assert min(np.abs(found.xy[:, 0] - expected).max(), np.abs(found.xy[:, 0] + expected).max()) < 1e-3
    table = EpochTable(os.path.join(epoch_dir, "epoch_table.parquet"))
    probabilities = read_embedding(embedding_path(epoch_dir, "probabilities"), "probabilities", signature)
    assert probabilities.idx.tolist() == table.values(["idx"])["idx"].tolist()


def test_a_space_the_epoch_has_not_is_named_with_those_it_has(epoch_dir):
    done = command("--run", epoch_dir, "--space=nope", "--method", "pca")
    assert done.returncode == 2
    assert "no feature space 'nope'" in done.stderr and "debugger:features, summaries, probabilities" in done.stderr


def test_a_map_is_read_only_while_its_epoch_and_space_are_as_they_were(tmp_path):
    path = str(tmp_path / "embeddings" / "map.parquet")
    stored = EmbeddingMap(np.array([2, 5, 9]), np.arange(6, dtype=np.float32).reshape(3, 2),
                          np.ones((3, 4), np.float32), {"space": "summaries", "signature": [1, [["a", 2, 3]]]})
    write_embedding(path, stored)
    back = read_embedding(path, "summaries", [1, [["a", 2, 3]]])
    assert back.idx.tolist() == [2, 5, 9] and back.xy.tolist() == stored.xy.tolist()
    assert back.components.shape == (3, 4)
    assert read_embedding(path, "summaries", [1, [["a", 2, 4]]]) is None  # the epoch changed since
    assert read_embedding(path, "probabilities", [1, [["a", 2, 3]]]) is None
    assert read_embedding(str(tmp_path / "none.parquet"), "summaries", []) is None


@pytest.mark.parametrize("kind", ["link", "columns", "nulls", "not parquet"])
def test_a_stored_map_that_is_not_one_lantern_wrote_is_refused_naming_it(tmp_path, kind):
    path = tmp_path / "map.parquet"
    if kind == "link":
        (tmp_path / "real.parquet").write_bytes(b"x")
        os.symlink(tmp_path / "real.parquet", path)
    elif kind == "not parquet":
        path.write_bytes(b"not a parquet file at all")
    else:
        x = pa.array([0.0, None] if kind == "nulls" else [0.0, 1.0], pa.float32())
        columns = {"idx": pa.array([1, 2], pa.int64()), "x": x, "y": pa.array([0.0, 1.0], pa.float32())}
        if kind == "nulls":
            columns["components"] = pa.FixedSizeListArray.from_arrays(pa.array([1.0, 2.0], pa.float32()), 1)
        about = {ABOUT_KEY: json.dumps({"format": FORMAT, "space": "summaries", "signature": []})}
        pq.write_table(pa.table(columns).replace_schema_metadata(about), path)
    with pytest.raises(RunFileError, match=str(path)):
        read_embedding(str(path), "summaries", [])

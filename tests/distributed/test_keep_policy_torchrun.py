"""A worst-k capture policy under real ``torchrun``: the k kept are the worst of all ranks together."""

from __future__ import annotations

import json
import os

import pytest

from runners.eval_viewer.backend.initialization import load_debug_outputs
from tests.distributed.test_torchrun import EVALUATOR, config_file
from tests.runs import run_torchrun

pytestmark = pytest.mark.slow  # runs in .ci/run's second command (README: the slow tests)

WORST_5 = 'config["debugger"]["args"]["keep"] = {"worst": 5, "by": "cross_entropy"}\n'


@pytest.mark.timeout(150)
def test_the_worst_k_under_torchrun_are_the_worst_of_all_ranks(tmp_path):
    result = run_torchrun(config_file(tmp_path, "worst", "CHECKPOINT = None\n" + EVALUATOR + WORST_5))
    assert result.returncode == 0, result.stdout
    work_dir = str(tmp_path / "worst")
    with open(os.path.join(work_dir, "evaluation_scores.json")) as f:
        scores = json.load(f)
    cross_entropy = dict(zip(scores["datapoint_idx"], scores["per_datapoint"]["cross_entropy"]))
    worst = set(sorted(cross_entropy, key=cross_entropy.get)[-5:])
    outputs = load_debug_outputs(work_dir)
    assert set(outputs) == worst
    assert all(set(outputs[idx]) == {"features", "logits"} for idx in worst)

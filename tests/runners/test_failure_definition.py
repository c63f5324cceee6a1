"""config['failure_definition']: checked at start-up, kept in the epoch table's roles, the analysis's default."""

import numpy as np
import pytest

from analysis.epoch_table import FAILURE_DEFINITION_ROLE, EpochTable, write_epoch_table
from analysis.failures import FailureDefinition, analyze_table
from metrics.segmentation_metric import SegmentationMetric
from runners.failure_definition import FailureDefinitionSettings
from utils.errors import ConfigError


@pytest.mark.parametrize("entry, words", [
    ({"metric": "accuracy"}, "does not give; its per-datapoint scores: iou, dice"),
    ({"metric": "iou", "worst_fraction": 1.5}, "between 0 and 1"),
    ({"metric": "iou", "fraction": 0.1}, "unknown setting 'fraction'"),
    ({"worst_fraction": 0.1}, r"lacks 'metric' \(a per-datapoint score"),
    ("iou", "must be"),
])
def test_a_malformed_definition_is_refused_at_start_up(entry, words):
    with pytest.raises(ConfigError, match=words):
        FailureDefinitionSettings.from_entry(entry).role(SegmentationMetric())


def test_a_definition_names_a_score_and_a_share():
    assert FailureDefinitionSettings.from_entry({"metric": "dice"}).role(SegmentationMetric()) == {
        "metric": "dice", "worst_fraction": 0.1}
    assert FailureDefinitionSettings.from_entry(None) is None


def table_with(tmp_path, role):
    iou = np.linspace(0.0, 1.0, 20)
    columns = {"idx": np.arange(20), "label": np.zeros(20, dtype=np.int64), "prediction": np.zeros(20, dtype=np.int64),
               "iou": iou, "dice": 1 - iou}
    roles = {"scores": ["iou", "dice"], "higher_is_better": {"iou": True, "dice": True}}
    if role is not None:
        roles[FAILURE_DEFINITION_ROLE] = role
    path = str(tmp_path / "epoch_table.parquet")
    write_epoch_table(path, columns, roles)
    return EpochTable(path)


def test_the_run_s_definition_is_the_analysis_default_and_an_explicit_one_wins(tmp_path):
    table = table_with(tmp_path, {"metric": "iou", "worst_fraction": 0.25})
    findings = analyze_table(table)
    assert findings.failures == 5 and "worst 25% of iou" in findings.failure_definition
    assert "the run's failure_definition" in findings.failure_definition
    assert analyze_table(table, failure=FailureDefinition("dice", 0.1)).failures == 2  # the user's choice wins


def test_without_one_or_with_a_damaged_one_labels_and_predictions_decide(tmp_path):
    for name, role in (("none", None), ("damaged", {"metric": "iou", "worst_fraction": "a lot"})):
        folder = tmp_path / name
        folder.mkdir()
        table = table_with(folder, role)
        assert FAILURE_DEFINITION_ROLE not in table.roles
        assert analyze_table(table).failure_definition == "wrong prediction (label != prediction)"

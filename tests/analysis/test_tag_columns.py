"""A run's tags (given in the viewer) are meta columns of the failure analysis: a tag whose datapoints fail far more
than the rest is its top meta slice; the stored findings are stale once the tags change; a tags file that cannot be
used leaves the tags out, said in a note, and the analysis goes on."""

from __future__ import annotations

import numpy as np

from analysis.failures import analyze
from analysis.findings import load_findings
from run_dir.tags_file import change_tags
from tests.analysis.tables import classified, write_table

ROWS = 2000


def tagged_run(folder) -> np.ndarray:
    """An evaluator-like folder whose failures are 8% but for 200 datapoints (the ones tagged 'blurry'), which fail
    70%; no meta column of the table says which they are."""
    rng = np.random.default_rng(0)
    blurry = np.zeros(ROWS, dtype=bool)
    blurry[rng.choice(ROWS, 200, replace=False)] = True
    failed = rng.random(ROWS) < np.where(blurry, 0.7, 0.08)
    columns = {**classified(rng, failed), "brightness": rng.uniform(0, 1, ROWS)}
    write_table(folder / "epoch_table.parquet", columns, meta=["brightness"], scores={"accuracy": True})
    return np.flatnonzero(blurry)


def test_a_tag_whose_datapoints_fail_more_is_the_top_meta_slice(tmp_path):
    blurry = tagged_run(tmp_path)
    assert not any("tag:" in c.column for s in analyze(str(tmp_path)).meta.slices for c in s.conditions)
    change_tags(str(tmp_path), "blurry", blurry.tolist())
    top = analyze(str(tmp_path)).meta.slices[0]
    assert [(c.column, c.value) for c in top.conditions] == [("tag:blurry", True)]
    assert top.idx.tolist() == blurry.tolist()


def test_stored_findings_are_stale_once_the_tags_change(tmp_path):
    blurry = tagged_run(tmp_path)
    analyze(str(tmp_path), save=True)
    assert load_findings(str(tmp_path)) is not None
    change_tags(str(tmp_path), "blurry", blurry[:5].tolist())
    assert load_findings(str(tmp_path)) is None


def test_a_tags_file_that_cannot_be_used_is_left_out_saying_why(tmp_path):
    tagged_run(tmp_path)
    (tmp_path / "tags.json").write_text("{damaged")
    findings = analyze(str(tmp_path))
    assert any(note.startswith("tags left out:") and "tags.json" in note for note in findings.notes)
    assert findings.meta.slices is not None

"""An epoch's findings for the Failures tab: the ones stored when the epoch was validated, else computed now.

The trainer stores each validation epoch's findings (its findings file, ``runners/findings_worker.py``), so
the tab draws them at once. They are read as data, with the run-file guards (a regular file inside the run, a size
cap, every field's type checked), and only when they are of the epoch table as it is now. Where none are stored (a
run from before, an analysis that did not finish, a damaged file), the tab computes them and says why.
"""

from __future__ import annotations

import os

from analysis.findings import Findings, load_findings
from run_dir.errors import RunFileError
from run_dir.names import EPOCH_TABLE_FILE, FINDINGS_FILE


def epoch_findings(epoch_dir: str) -> Findings:
    """The stored findings of ``epoch_dir``'s table as it is now, else computed (``AnalysisError``,
    ``EpochTableError`` when they cannot be)."""
    path = os.path.join(epoch_dir, EPOCH_TABLE_FILE)
    why = "none were stored for this epoch (a run from before, or its background analysis did not finish)"
    if os.path.isfile(path):
        try:
            stored = load_findings(epoch_dir)
        except (RunFileError, OSError) as exc:
            stored, why = None, f"its stored {FINDINGS_FILE} could not be read ({exc})"
        if stored is not None:
            return stored
        if os.path.lexists(os.path.join(epoch_dir, FINDINGS_FILE)) and why.startswith("none"):
            why = f"its stored {FINDINGS_FILE} is of an earlier version of the epoch's table, debug outputs or Lantern"
    from analysis.failures import analyze  # scikit-learn and the rest of the analysis: imported only to compute

    findings = analyze(epoch_dir)
    findings.notes.insert(0, f"These findings were computed now: {why}.")
    return findings

"""Keep a run's full debug outputs under ``debug_disk_budget_gb`` after each epoch: the oldest epochs' go first.

A GB here is 2**30 bytes, as every size Lantern prints (an MB is 2**20). The budget holds once an epoch is
done: while an epoch writes its outputs, the disk holds up to the budget plus that epoch's outputs.

After each epoch the trainer adds up the ``epoch_N/debugger/`` folders of the finished epochs. While the total
is over the budget, the oldest epoch's folder is removed: never the latest finished epoch's, and never anything
else (the epoch table with the summaries, the scores and the checkpoints stay). The folder of an epoch a killed
run left unfinished is not counted: the trainer empties it when it redoes that epoch. A marker
``epoch_N/debugger_removed.json`` says what was removed and why (``message``: "removed to stay under N GB"),
for the log and the viewer.

A kill at any point leaves a state the next start completes (``finish_interrupted_removals``): the marker
is written first, then the folder is renamed out of the way in one step, then deleted.
"""

from __future__ import annotations

import logging
import os
import shutil
import time

from run_dir.folder import RunDir
from run_dir.names import DEBUGGER_DIR, REMOVED_MARKER, REMOVING_DIR
from utils.atomic_files import atomic_write_json


def keep_under_budget(work_dir: str, budget_gb: float, log: logging.Logger, completed_epochs: int) -> list[int]:
    """Remove the oldest finished epochs' debug outputs until their total fits the budget; return their epochs.

    Only epochs below ``completed_epochs`` count: a half-written later epoch (a killed run's) is no "latest
    epoch", and counting it would remove the outputs of the latest finished one."""
    finish_interrupted_removals(work_dir)
    budget = budget_gb * 2**30
    run = RunDir(work_dir)
    sizes = {epoch: folder_bytes(run.epoch(epoch).debugger) for epoch in run.epochs_holding(DEBUGGER_DIR)
             if epoch < completed_epochs}
    total, removed = sum(sizes.values()), []
    for epoch in sorted(sizes)[:-1]:  # the latest epoch's outputs always stay
        if total <= budget:
            break
        remove_debug_outputs(run.epoch(epoch).path, sizes[epoch], budget_gb)
        total -= sizes[epoch]
        removed.append(epoch)
        log.info(f"epoch {epoch}: debug outputs removed ({_size(sizes[epoch])}) to stay under "
                 f"{budget_gb:g} GB (debug_disk_budget_gb); its summaries and scores are kept")
    if total > budget and sizes:
        log.warning(f"epoch {max(sizes)}'s debug outputs alone take {_size(total)}, over the "
                    f"{budget_gb:g} GB budget; they are kept (the latest epoch's outputs are never removed). "
                    "Raise debug_disk_budget_gb, or keep fewer outputs (keep='failing', or fewer debuggers)")
    return removed


def remove_debug_outputs(epoch_dir: str, size: int, budget_gb: float) -> None:
    """Marker first, then an atomic rename, then the deletion: a kill anywhere is completed on restart."""
    atomic_write_json(os.path.join(epoch_dir, REMOVED_MARKER), {
        "removed_bytes": size, "budget_gb": budget_gb, "removed_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "message": f"removed to stay under {budget_gb:g} GB",
    })
    _complete_removal(epoch_dir)


def finish_interrupted_removals(work_dir: str) -> None:
    """Complete removals a killed run left half done (a marker beside a folder still there)."""
    run = RunDir(work_dir)
    for epoch in run.epochs_holding(REMOVED_MARKER):
        _complete_removal(run.epoch(epoch).path)


def folder_bytes(folder: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(folder) for name in names)


def _size(n_bytes: int) -> str:
    """A size in GB, or in MB below a tenth of a GB (a small epoch is not "0.000 GB")."""
    return f"{n_bytes / 2**30:.2f} GB" if n_bytes >= 2**30 / 10 else f"{n_bytes / 2**20:.1f} MB"


def _complete_removal(epoch_dir: str) -> None:
    outputs, removing = os.path.join(epoch_dir, DEBUGGER_DIR), os.path.join(epoch_dir, REMOVING_DIR)
    if os.path.isdir(outputs):
        if os.path.isdir(removing):  # a second interrupted removal of the same epoch
            shutil.rmtree(removing)
        os.rename(outputs, removing)
    if os.path.isdir(removing):
        shutil.rmtree(removing)

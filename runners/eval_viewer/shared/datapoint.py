"""Assemble one datapoint for display: its inputs, scores and debug outputs, each failing on its own.

Missing captured inputs, a missing scores file or a tampered debug page each become a
message in the returned dict, so the other parts of the datapoint still show.
Only the page holding the datapoint is read.
"""

from __future__ import annotations

from typing import Any, Optional

from debuggers.pages.file_format import CorruptPageError, UnsafePageError
from run_dir.names import ITEM_KEYS
from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.datasets import DatasetUnavailable, not_captured
from runners.eval_viewer.shared.runs import Epoch, Run
from runners.eval_viewer.shared.table import TABLE_ERRORS


def load_datapoint(backend: ViewerBackend, run: Run, epoch: Epoch, idx: int, with_item: bool = True) -> dict:
    """``{'inputs', 'labels', 'meta_info', 'dataset_error', 'debug', 'debug_error', 'scores', 'scores_error'}``.

    ``debug`` is None where the epoch has no debug outputs (three sections), a dict
    (possibly empty) where it has. ``with_item=False`` skips the inputs (comparisons).
    """
    datapoint: dict[str, Any] = {"idx": idx}
    missing = missing_datapoint(backend, run, epoch, idx)
    if missing:
        return {**datapoint, "missing": missing, "scores": {}, "debug": None}
    if with_item:
        datapoint.update(load_item(backend, run, idx))
    datapoint.update(_debug(backend, epoch, idx))
    datapoint.update(_scores(backend, epoch, idx))
    return datapoint


def _scores(backend: ViewerBackend, epoch: Epoch, idx: int) -> dict[str, Any]:
    """``{'scores': {name: value}, 'classes': {'label', 'prediction'}, 'class_names', 'calibration'}`` of ``idx``
    from the epoch's table (class ids, and their names where the table has them; the epoch's calibration pairs,
    ``ViewerBackend.calibration``), or ``{'scores': {}, 'scores_error'}``."""
    try:
        table = backend.table(epoch)
        rows = table.page(where=[("idx", "=", idx)], limit=1)
        class_names = backend.class_names(epoch)
        calibration = backend.calibration(epoch)
    except TABLE_ERRORS as exc:
        return {"scores": {}, "scores_error": str(exc)}
    names = table.roles.get("scores", [])
    if "problem" in table.roles:
        return {"scores": {}, "scores_error": table.roles["problem"]}
    classes = {key: rows[0][key] for key in ("label", "prediction") if rows and rows[0].get(key) is not None}
    return {"scores": {name: rows[0].get(name) for name in names} if rows else {}, "classes": classes,
            "class_names": class_names, "calibration": calibration}


def missing_datapoint(backend: ViewerBackend, run: Run, epoch: Epoch, idx: int) -> Optional[str]:
    """Why ``run`` has no datapoint ``idx`` at ``epoch`` (neither scores nor debug outputs), else None.

    A datapoint opened in one run may not exist in another (a smaller validation set):
    that is said plainly, instead of blaming the config or a half-written epoch.
    """
    if idx in backend.debug_indices(epoch):
        return None
    try:
        table = backend.table(epoch)
        if table.count([("idx", "=", idx)]):
            return None
        total = table.count()
        if not total:
            return None
        first, last = (table.page(order_by="idx", descending=order, limit=1)[0]["idx"] for order in (False, True))
    except TABLE_ERRORS:
        return None
    return (f"{run.name} has no datapoint with idx {idx} at {epoch.label}: its {total} datapoints are "
            f"idx {first}..{last}. Pick one of them in the table.")


def load_item(backend: ViewerBackend, run: Run, idx: int) -> dict[str, Any]:
    """``{'inputs', 'labels', 'meta_info'}`` of ``idx`` as the run captured them, else rebuilt from the run's
    config when the user opted in (``--trust-configs``), else ``{'dataset_error'}`` saying why and what to do."""
    try:
        captured = backend.captured(run)
        item = captured.get(idx) if captured is not None else None
    except (CorruptPageError, UnsafePageError, OSError) as exc:
        if not backend.trust_configs:
            return {"dataset_error": f"the captured inputs of {run.name} cannot be read: {exc}"}
        captured, item = None, None
    if item is not None:
        return {key: item.get(key) for key in ITEM_KEYS}
    if backend.trust_configs:
        return _rebuilt_item(backend, run, idx)
    return {"dataset_error": not_captured(run, idx, captured)}


def _rebuilt_item(backend: ViewerBackend, run: Run, idx: int) -> dict[str, Any]:
    try:
        dataset = backend.dataset(run)
    except DatasetUnavailable as exc:
        return {"dataset_error": str(exc)}
    try:
        item = dataset[idx]
    except IndexError:
        return {"dataset_error": f"datapoint {idx} is not in the dataset rebuilt from {run.config_filepath} "
                                 f"({len(dataset)} datapoints): the config changed since the run; "
                                 "rerun it to see this datapoint"}
    except Exception as exc:  # the user's dataset code: the rest of the datapoint still shows
        return {"dataset_error": f"the dataset rebuilt from {run.config_filepath} failed on datapoint {idx}: "
                                 f"{type(exc).__name__}: {exc}"}
    return {key: item.get(key) for key in ITEM_KEYS}


def _debug(backend: ViewerBackend, epoch: Epoch, idx: int) -> dict[str, Optional[Any]]:
    if epoch.debug_removed:
        return {"debug": {}, "debug_note": f"The debug outputs of {epoch.label} were {epoch.debug_removed} "
                                           "(config['debug_disk_budget_gb']); its scores and debugger summaries "
                                           "are kept. Epochs with debug outputs are marked ◆ in the chart."}
    if not epoch.has_debug:
        return {"debug": None}
    try:
        debug = backend.debug(epoch)
        outputs = debug.get(idx) if debug is not None else None
        if outputs is None and debug is not None and debug.complete:
            return {"debug": {}, "debug_note": f"no debug outputs of datapoint {idx} were kept at {epoch.label} "
                                               "(its debug index does not list it): a capture policy ('keep' in "
                                               "the debugger config) writes only the datapoints it selects"}
    except (CorruptPageError, UnsafePageError) as exc:
        return {"debug": {}, "debug_error": str(exc)}
    except OSError as exc:
        return {"debug": {}, "debug_error": f"debug outputs of {epoch.label} in {epoch.dir} cannot be read "
                                            f"({exc}); check the folder's permissions"}
    return {"debug": outputs or {}}

"""What the training monitor's frames mean, and the whole log read back as arrays (``read_training_log``).

Frames (``monitor_file``), by their field ``kind``:

- ``layout``: the layers (modules with parameters of their own, in ``named_modules`` order), their types and
  parameter counts, and the settings; written when the file is created, and again if the layers change.
- ``step``: a monitored step: its ``loss`` and arrays ``lr`` (G,) per parameter group (as many in every row),
  ``grad_norm``, ``weight_norm``, ``update_ratio`` (L,) and ``grad_state`` (L,) (``GRAD_STATES``); ``losses``
  holds the loss of every step from ``first_step`` to this one.
- ``epoch``: an epoch's end: ``step`` the steps done so far, ``losses`` from ``first_step``, ``nonfinite_steps``,
  and per layer the weight and gradient histograms (``weight_counts`` (L, bins) over ``weight_range`` (L, 2),
  ``weight_nonfinite`` (L,), the same for ``grad_``; the gradients of the epoch's last step).
- ``nonfinite``: the first step whose loss or gradient was not finite: the batch's idx, the first layer whose
  output went non-finite (the NaN-origin debugger rerun on that batch), the layers with NaN/Inf gradients,
  what was done (``action``) and the ``message`` the run stopped or warned with.

Every field is checked on read: a frame of a known kind whose fields are not what the monitor writes is
skipped and counted in ``TrainingLog.problems``, so a crafted file yields fewer rows, never an exception.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from run_dir.monitor_file import MAGIC, MAX_READ_BYTES, Frame, read_frames

KIND_LAYOUT, KIND_STEP, KIND_EPOCH, KIND_NONFINITE = "layout", "step", "epoch", "nonfinite"
GRAD_OK, GRAD_ZERO, GRAD_MISSING, GRAD_FROZEN, GRAD_NONFINITE = range(5)
GRAD_STATES = {GRAD_OK: "ok", GRAD_ZERO: "zero", GRAD_MISSING: "missing", GRAD_FROZEN: "frozen",
               GRAD_NONFINITE: "non-finite"}
MAX_TEXT = 4000  # characters of a message or name kept from a frame
MAX_LISTED = 1000  # idx or layer names kept from a frame's list


@dataclass
class EpochHistograms:
    """Weight and gradient histograms of each layer at one epoch's end."""

    epoch: int
    step: int
    weight_counts: np.ndarray  # (L, bins)
    weight_range: np.ndarray  # (L, 2): the first and last bin edge; nan for a layer with no finite value
    grad_counts: np.ndarray
    grad_range: np.ndarray
    weight_nonfinite: np.ndarray  # (L,) values left out of the counts
    grad_nonfinite: np.ndarray
    nonfinite_steps: int


@dataclass
class NonFiniteEvent:
    """The first step whose loss or gradient was NaN/Inf, as the monitor found it."""

    epoch: int
    step: int
    loss: Optional[float]
    batch_idx: list[int]
    first_layer: Optional[str]
    first_layer_type: Optional[str]
    first_layer_idx: list[int]  # the batch's datapoints whose output went non-finite first in first_layer
    gradient_layers: list[str]  # layers whose gradient holds NaN/Inf
    input_nonfinite_idx: list[int]  # datapoints whose inputs already hold NaN/Inf
    action: str
    message: str


@dataclass
class TrainingLog:
    """A run's monitor file read back. Rows (R) are monitored steps; ``loss_steps``/``losses`` every step."""

    layers: list[str] = field(default_factory=list)
    layer_types: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    epochs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    lr: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    grad_norm: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    weight_norm: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    update_ratio: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    grad_state: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.uint8))
    loss_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    losses: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    histograms: list[EpochHistograms] = field(default_factory=list)
    events: list[NonFiniteEvent] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def first_nonfinite_step(self) -> Optional[int]:
        steps = [event.step for event in self.events]
        bad = self.loss_steps[~np.isfinite(self.losses)]
        steps += [int(bad[0])] if bad.size else []
        return min(steps) if steps else None


class TrainingLogReader:
    """Reads a monitor file and, on each later ``read``, only what a live run appended since (the whole file
    again when it was cut or replaced: a resumed run cuts the frames of the epoch it redoes)."""

    def __init__(self, path: str, max_bytes: int = MAX_READ_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._identity: Optional[tuple[int, int]] = None
        self._end = len(MAGIC)
        self._frames: list[Frame] = []
        self._problem: Optional[str] = None

    def read(self) -> TrainingLog:
        stat = os.lstat(self.path)
        identity = (stat.st_dev, stat.st_ino)
        new = identity != self._identity or stat.st_size < self._end
        if new:
            self._identity, self._end, self._frames = identity, len(MAGIC), []
        if new or stat.st_size > self._end:  # a new file is opened even when empty: it may not be a file at all
            got = read_frames(self.path, self._end, self.max_bytes - (self._end - len(MAGIC)))
            self._frames.extend(got.frames)
            self._end, self._problem = got.end, got.problem
        return assemble(self._frames, [self._problem] if self._problem else [])


def read_training_log(path: str, max_bytes: int = MAX_READ_BYTES) -> TrainingLog:
    """The monitor file at ``path`` as arrays (``FileNotFoundError`` when absent)."""
    return TrainingLogReader(path, max_bytes).read()


def assemble(frames: list[Frame], problems: list[str]) -> TrainingLog:
    """The log the frames make: the last layout's layers; rows and histograms that fit them."""
    log = TrainingLog(problems=list(problems))
    rows: list[tuple] = []
    loss_parts: list[tuple[int, np.ndarray]] = []
    skipped = 0
    for frame in frames:
        kind = frame.fields.get("kind")
        parsed = _PARSERS.get(kind, lambda *_: True)(frame, log, rows, loss_parts)
        skipped += not parsed
    if skipped:
        log.problems.append(f"{skipped} frame(s) whose fields are not what the training monitor writes were skipped")
    _fill_rows(log, rows)
    _fill_losses(log, loss_parts)
    return log


def _parse_layout(frame: Frame, log: TrainingLog, rows: list, loss_parts: list) -> bool:
    layers, types = frame.fields.get("layers"), frame.fields.get("layer_types")
    if not _strings(layers) or not _strings(types) or len(types) != len(layers):
        return False
    layers = [s[:MAX_TEXT] for s in layers]
    if layers != log.layers:  # rows of other layers do not fit the new ones (new settings keep them)
        rows.clear()
        log.histograms.clear()
    log.layers, log.layer_types = layers, [s[:MAX_TEXT] for s in types]
    log.settings = {key: value for key, value in frame.fields.items()
                    if key not in ("layers", "layer_types", "kind") and isinstance(value, (int, float, str))}
    return True


def _parse_step(frame: Frame, log: TrainingLog, rows: list, loss_parts: list) -> bool:
    fields, arrays, layers = frame.fields, frame.arrays, len(log.layers)
    names = ("grad_norm", "weight_norm", "update_ratio", "grad_state")
    if not (_ints(fields, "epoch", "step", "first_step") and all(arrays.get(n, np.zeros((0, 0))).shape == (layers,)
                                                                for n in names)
            and _vector(arrays.get("lr")) and _vector(arrays.get("losses"))
            and fields["step"] - fields["first_step"] + 1 == len(arrays["losses"])
            and (not rows or len(arrays["lr"]) == len(rows[0][2]))):  # one optimizer: as many groups in each row
        return False
    rows.append((fields["step"], fields["epoch"], arrays["lr"], *(arrays[n] for n in names)))
    loss_parts.append((fields["first_step"], arrays["losses"]))
    return True


def _parse_epoch(frame: Frame, log: TrainingLog, rows: list, loss_parts: list) -> bool:
    fields, arrays, layers = frame.fields, frame.arrays, len(log.layers)
    counts = [arrays.get(f"{kind}_counts") for kind in ("weight", "grad")]
    ranges = [arrays.get(f"{kind}_range") for kind in ("weight", "grad")]
    nonfinite = [arrays.get(f"{kind}_nonfinite") for kind in ("weight", "grad")]
    if not (_ints(fields, "epoch", "step", "first_step", "nonfinite_steps") and _vector(arrays.get("losses"))
            and fields["step"] - fields["first_step"] == len(arrays["losses"])
            and all(c is not None and c.ndim == 2 and c.shape[0] == layers for c in counts)
            and all(r is not None and r.shape == (layers, 2) for r in ranges)
            and all(n is not None and n.shape == (layers,) for n in nonfinite)):
        return False
    log.histograms = [h for h in log.histograms if h.epoch != fields["epoch"]]
    log.histograms.append(EpochHistograms(fields["epoch"], fields["step"], counts[0], ranges[0], counts[1], ranges[1],
                                          nonfinite[0], nonfinite[1], fields["nonfinite_steps"]))
    loss_parts.append((fields["first_step"], arrays["losses"]))
    return True


def _parse_nonfinite(frame: Frame, log: TrainingLog, rows: list, loss_parts: list) -> bool:
    f = frame.fields
    lists = ("batch_idx", "first_layer_idx", "input_nonfinite_idx")
    if not (_ints(f, "epoch", "step") and all(_int_list(f.get(k)) for k in lists)
            and _strings(f.get("gradient_layers")) and isinstance(f.get("action"), str)
            and isinstance(f.get("message"), str) and all(_optional_str(f.get(k))
                                                          for k in ("first_layer", "first_layer_type"))):
        return False
    loss = f.get("loss")
    log.events.append(NonFiniteEvent(
        f["epoch"], f["step"], float(loss) if type(loss) in (int, float) else None,
        f["batch_idx"][:MAX_LISTED], _text(f.get("first_layer")), _text(f.get("first_layer_type")),
        f["first_layer_idx"][:MAX_LISTED], [s[:MAX_TEXT] for s in f["gradient_layers"][:MAX_LISTED]],
        f["input_nonfinite_idx"][:MAX_LISTED], f["action"][:MAX_TEXT], f["message"][:MAX_TEXT]))
    return True


_PARSERS = {KIND_LAYOUT: _parse_layout, KIND_STEP: _parse_step, KIND_EPOCH: _parse_epoch,
            KIND_NONFINITE: _parse_nonfinite}


def _fill_rows(log: TrainingLog, rows: list[tuple]) -> None:
    if not rows:
        log.lr = np.zeros((0, 0))
        layers = len(log.layers)
        log.grad_norm, log.weight_norm, log.update_ratio = (np.zeros((0, layers), np.float32) for _ in range(3))
        log.grad_state = np.zeros((0, layers), np.uint8)
        return
    log.steps = np.array([row[0] for row in rows], np.int64)
    log.epochs = np.array([row[1] for row in rows], np.int64)
    log.lr = np.stack([row[2].astype(np.float64) for row in rows])
    log.grad_norm, log.weight_norm, log.update_ratio, log.grad_state = (np.stack([row[i] for row in rows])
                                                                        for i in range(3, 7))


def _fill_losses(log: TrainingLog, parts: list[tuple[int, np.ndarray]]) -> None:
    """Every step's loss once, by step; where parts overlap (a crafted file) the later part's value is kept."""
    if not parts:
        return
    steps = np.concatenate([np.arange(first, first + len(losses), dtype=np.int64) for first, losses in parts])
    values = np.concatenate([losses.astype(np.float32) for _, losses in parts])
    unique, last = np.unique(steps[::-1], return_index=True)
    log.loss_steps, log.losses = unique, values[::-1][last]


def _ints(fields: dict, *keys: str) -> bool:
    return all(type(fields.get(k)) is int and 0 <= fields[k] < 2**53 for k in keys)


def _int_list(value: Any) -> bool:
    return isinstance(value, list) and all(type(v) is int for v in value)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _optional_str(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _text(value: Optional[str]) -> Optional[str]:
    return None if value is None else value[:MAX_TEXT]


def _vector(array: Optional[np.ndarray]) -> bool:
    return array is not None and array.ndim == 1

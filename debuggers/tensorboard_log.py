"""The training monitor's records as TensorBoard event files, with ``config['training_monitor']['tensorboard']``:
the same frames the monitor writes to ``training_monitor.bin``, under the tags of the PyTorch chapter's example
(``Loss/train_batch``, ``Loss/train``, ``LR``, ``weights/<layer>``, ``gradients/<layer>``) and the validation
scores (``val/<score>``), all against the training step. ``tensorboard --logdir <work dir>/tensorboard`` shows them.

The ``tensorboard`` package is optional (``pip install tensorboard``, or the ``tensorboard`` extra): asked for
without it, the run stops at start-up saying so. A resumed run purges the events of the steps it redoes.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from run_dir.training_log import KIND_EPOCH, KIND_NONFINITE, KIND_STEP
from utils.errors import ConfigError


def require_tensorboard() -> None:
    """Stop at once when the ``tensorboard`` package is missing."""
    if importlib.util.find_spec("tensorboard") is None:
        raise ConfigError("config['training_monitor']['tensorboard'] = True needs the tensorboard package, which is "
                          "not installed: pip install tensorboard (or Lantern's extra: pip install -e "
                          "'.[tensorboard]'), or leave the setting out")


class TensorBoardLog:
    """Writes the monitor's frames (``add``) and the validation scores (``add_scores``) as TensorBoard events in
    ``folder``; ``layers``: the monitor's layer names, in its rows' order; ``start_step``: the first step this run
    trains (a resumed run's earlier events from there on are purged)."""

    def __init__(self, folder: str, layers: list[str], start_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter  # optional: imported only when asked for

        self._writer = SummaryWriter(folder, purge_step=start_step if start_step > 0 else None)
        self.layers = layers
        self._epoch_losses: list[float] = []

    def add(self, fields: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """A monitor frame (``run_dir.training_log``) as events."""
        kind, step = fields.get("kind"), fields.get("step")
        if kind == KIND_STEP:
            self._losses(fields["first_step"], arrays["losses"])
            self._learning_rates(step, arrays["lr"])
            for tag, values in (("grad_norm", arrays["grad_norm"]), ("update_ratio", arrays["update_ratio"])):
                for layer, value in zip(self.layers, values.tolist()):
                    if np.isfinite(value):
                        self._writer.add_scalar(f"{tag}/{layer}", value, step)
        elif kind == KIND_EPOCH:
            self._losses(fields["first_step"], arrays["losses"])
            if self._epoch_losses:
                self._writer.add_scalar("Loss/train", float(np.mean(self._epoch_losses)), step)
            self._epoch_losses = []
            for tag, part in (("weights", "weight"), ("gradients", "grad")):
                self._histograms(tag, step, arrays[f"{part}_counts"], arrays[f"{part}_range"])
            self._writer.flush()
        elif kind == KIND_NONFINITE:
            self._writer.add_text("nonfinite", str(fields.get("message", "")), step)
            self._writer.flush()

    def add_scores(self, step: int, scores: dict[str, Any]) -> None:
        """An epoch's aggregated validation scores, at the step training reached."""
        for name, value in scores.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value):
                self._writer.add_scalar(f"val/{name}", float(value), step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def _losses(self, first_step: int, losses: np.ndarray) -> None:
        for offset, loss in enumerate(losses.tolist()):
            self._writer.add_scalar("Loss/train_batch", loss, first_step + offset)
            self._epoch_losses.append(loss)

    def _learning_rates(self, step: int, rates: np.ndarray) -> None:
        if len(rates) == 1:
            self._writer.add_scalar("LR", float(rates[0]), step)
        for group, rate in enumerate(rates.tolist() if len(rates) > 1 else []):
            self._writer.add_scalar(f"LR/group_{group}", rate, step)

    def _histograms(self, tag: str, step: int, counts: np.ndarray, ranges: np.ndarray) -> None:
        """Each layer's histogram from the monitor's counts over its range (no copy of the weights again)."""
        for layer, layer_counts, (low, high) in zip(self.layers, counts, ranges):
            total = float(layer_counts.sum())
            if total == 0 or not (np.isfinite(low) and np.isfinite(high)):
                continue  # no value to show (no gradient yet, or none finite)
            edges = np.linspace(low, high, len(layer_counts) + 1)
            centres = (edges[:-1] + edges[1:]) / 2
            self._writer.add_histogram_raw(
                f"{tag}/{layer}", min=float(low), max=float(high), num=total,
                sum=float((centres * layer_counts).sum()), sum_squares=float((centres ** 2 * layer_counts).sum()),
                bucket_limits=edges[1:].tolist(), bucket_counts=layer_counts.tolist(), global_step=step)

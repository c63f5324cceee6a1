"""``BaseDebugger``: anything that turns a batch (and the model) into debug outputs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Optional, Protocol

import numpy as np
import torch


class Removable(Protocol):
    def remove(self) -> None: ...


class BaseDebugger(ABC):
    """Base class for all debuggers.

    ``__call__`` sees the whole batch after the model's forward pass and returns
    its output with the **batch first**: every tensor or array has one row per
    datapoint (see ``debuggers/batch_split.py`` for the full contract).

    Optional hooks mirror a callback lifecycle: ``attach(model)`` runs when
    capture is enabled and returns removable handles (forward hooks, capture
    listeners) that are removed when it is disabled, so a disabled debugger
    leaves nothing on the model; ``clear()`` runs after each batch, ``release()``
    when capture is disabled. Set ``runs_model = True`` on debuggers that run
    the model themselves (Grad-CAM, gradients): they run after all the others,
    with every other debugger's hooks detached.
    """

    runs_model: bool = False

    @abstractmethod
    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> Any:
        """Return this batch's debug output (tensors batch first)."""
        raise NotImplementedError

    def layer_names(self) -> list[str]:
        """Layers this debugger needs; ``SequentialDebugger`` checks them at start-up."""
        return []

    def attach(self, model: torch.nn.Module) -> list[Removable]:
        """Install what capture needs on ``model``; return handles to undo it."""
        return []

    def clear(self) -> None:  # noqa: B027 - an optional hook, a no-op by default
        """Forget anything captured for the last batch."""

    def release(self) -> None:  # noqa: B027 - an optional hook, a no-op by default
        """Capture has stopped (the epoch is over): let go of what is kept from batch to batch (buffers)."""

    summary_roles: dict[str, str] = {}
    """What some ``summary`` keys are, for the failure analysis: ``'outcome'`` for a quantity computed from the
    model's output for the target or predicted class (a target score, a confidence, a predicted class), which
    restates a failure rather than explaining it and is never offered as a cause; ``'input_region'`` for where in
    the input the debugger's map points (intervening on such a finding masks that region)."""

    def summary(self, output: Any) -> dict[str, float]:
        """A few floats that sum up one datapoint's output, for the epoch table and the failure analysis.

        ``output`` is one datapoint's output as this debugger returned it after the batch split (tensors
        or NumPy arrays, never an error or not-run record). Return a small flat dict such as
        ``{'sparsity': 0.41, 'l2_norm': 13.2}``: each key becomes the column ``'<debugger name>.<key>'``.
        The default returns ``{}``: a debugger without a summary adds no columns.
        """
        return {}

    def summary_columns(self, outputs: list[Any]) -> Optional[dict[str, np.ndarray]]:
        """The summaries of a batch's datapoints at once, one array per key whose row i is what
        ``summary(outputs[i])`` gives, for a debugger that computes them vectorised (a Python call per
        datapoint costs more than the arithmetic). None, the default: ``summary`` is called per datapoint.
        """
        return None

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

    def not_run_reason(self, model: torch.nn.Module) -> Optional[str]:
        """Why this debugger, called on a batch just now, returned None: it did not run (its layer, or the model,
        did not run while it was attached; no capture point offered it anything), said on its pages. None: it
        ran, and None is its output."""
        return None

    summary_roles: dict[str, str] = {}
    """What some ``summary`` keys are, for the failure analysis: ``'outcome'`` for a quantity computed from the
    model's output for the target or predicted class (a target score, a confidence, a predicted class), which
    restates a failure rather than explaining it and is never offered as a cause; ``'input_region'`` for where in
    the input the debugger's map points (intervening on such a finding masks that region)."""

    def summary(self, output: Any) -> dict[str, float]:
        """A few floats that sum up one datapoint's output, for the epoch table and the failure analysis.

        ``output`` is one datapoint's output as its pages hold it (NumPy arrays and Python numbers, never an
        error or not-run record). Return a small flat dict such as ``{'sparsity': 0.41, 'l2_norm': 13.2}``: each
        key becomes the column ``'<debugger name>.<key>'``. The default: row 0 of ``summary_columns`` of the
        output as a batch of one, ``{}`` for a debugger without either (it adds no columns).
        """
        if type(self).summary_columns is BaseDebugger.summary_columns:
            return {}
        columns = self.summary_columns(batch_of_one(output)) or {}
        return {key: float(np.asarray(column).reshape(-1)[0]) for key, column in columns.items()}

    def summary_columns(self, output: Any) -> Optional[dict[str, Any]]:
        """The summaries of a whole batch in one call: ``output`` is what ``__call__`` returned for the batch
        (tensors batch first, on the model's device), the result one (B,) tensor or array per key, row i what
        ``summary`` gives datapoint i. A Python call per datapoint costs more than the arithmetic; a debugger
        that overrides this gets ``summary`` from it. None, the default: ``summary`` is called per datapoint.
        """
        return None


def batch_of_one(output: Any) -> Any:
    """One datapoint's page value as a batch of one, for ``summary_columns``: arrays and tensors get a first
    dimension of 1, numbers become arrays of one; lists stay as they are (shared by the batch, as the batch
    contract reads them)."""
    if isinstance(output, (torch.Tensor, np.ndarray)):
        return output[None]
    if isinstance(output, (bool, int, float, np.number, np.bool_)):
        return np.asarray([output])
    if isinstance(output, dict):
        return {key: batch_of_one(value) for key, value in output.items()}
    return output

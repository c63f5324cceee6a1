"""Reading checkpoints with errors that say what to do."""

from __future__ import annotations

import os

import torch

from utils.errors import CheckpointError


def load_checkpoint_file(path: str) -> dict:
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint {path!r} does not exist; check the path or train the model first")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(f"checkpoint {path!r} cannot be read ({exc}); it may be truncated: "
                              "delete it and train again") from exc


def load_model_state(model: torch.nn.Module, state: dict, path: str) -> None:
    """Load ``state`` strictly, explaining a mismatch instead of printing torch's key dump."""
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    mismatched = [f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
                  for k in own if k in state and tuple(state[k].shape) != tuple(own[k].shape)]
    if missing or unexpected or mismatched:
        raise CheckpointError(
            f"checkpoint {path!r} does not fit the model {type(model).__name__}: "
            f"missing {missing[:5]}, unexpected {unexpected[:5]}, shape mismatch {mismatched[:5]}. "
            "Use the same 'model' config (class and args) as the run that wrote the checkpoint"
        )
    model.load_state_dict(state)

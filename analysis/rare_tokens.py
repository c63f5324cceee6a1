"""Rare tokens: a column derived from a run's captured token inputs, for causes no feature space shows.

A token model fails on words it never learnt: a rare spelling, an out-of-vocabulary word, a code seen in a handful
of messages. The model maps them to nothing it knows, so in every feature space it captures their datapoints sit
among the other failures as if at random, and no search of those spaces can find them; the inputs themselves tell
them apart. So, where the run captured its inputs (``<run>/datapoints/``, read as data: no code it names is
imported), each integer token input gets a column ``input:rare_token_share``: the share of a datapoint's real
tokens (padding aside) that are *rare*, held by at most ``RARE_SHARE`` of the epoch's datapoints (document
frequency; at least one datapoint). Why 1 %: a token that few datapoints hold was seen about as seldom in training
(the validation set is drawn like the training set), too seldom to learn, while the words that carry meaning recur
far more; and a group of datapoints must be 1 % of the epoch (at least 10) before the analysis names it
(``analyze_table``'s ``min_size``), so a cause that one rare token carries alone is below what is reported anyway.
The slice search treats the column as any numeric column, cut where failures start, in a family of its own
(inputs, ``analysis/columns.py``).

A token input is a 1-D array of at least ``MIN_LENGTH`` non-negative integers per datapoint, one of them above 1,
whose name does not say it is a mask: a float input (an image, a signal) never is, nor a 0/1 mask or segment ids,
nor a few integers that are no words (a point prompt in pixels, a box). Padding: the
1-D 0/1 input of the same length whose name holds ``mask`` (``attention_mask``), where captured, else the trailing
run of the id that ends the most datapoints. Several token inputs give a column each, named
``input:<name>.rare_token_share``.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import numpy as np

from debuggers.pages.errors import DebugDataError
from debuggers.pages.reader import DebugOutputs
from run_dir import RunDir
from run_dir.folder import run_of

PREFIX = "input:"
SHARE = "rare_token_share"
RARE_SHARE = 0.01  # a token held by at most this share of the epoch's datapoints is rare
MIN_LENGTH = 8  # positions of a token input: a point (2), a box (4) or a few class ids are no sequence of words
MEANING = (f"{PREFIX}{SHARE} is derived from the captured inputs: the share of a datapoint's tokens (padding aside) "
           f"that at most {RARE_SHARE:.0%} of this epoch's datapoints hold, words the model met too seldom to learn "
           "(a rare spelling, an out-of-vocabulary word); no feature space of the model tells them apart")


def rare_token_columns(epoch_dir: str, idx: np.ndarray) -> tuple[dict[str, np.ndarray], Optional[str]]:
    """A ``rare_token_share`` column per token input the run holding ``epoch_dir`` captured, a row per ``idx``
    (NaN: not captured, or no real token); and why there are none when the capture cannot be read (the analysis
    goes on without them). Nothing without a capture or a token input: only the first datapoint is read then."""
    folder = RunDir(run_of(epoch_dir)).datapoints
    if not os.path.isdir(folder):
        return {}, None
    try:
        tokens = _captured_tokens(DebugOutputs(folder))
    except DebugDataError as exc:
        return {}, f"the rare-token columns were left out: the captured inputs cannot be read: {exc}"
    names = {name: PREFIX + (SHARE if len(tokens) == 1 else f"{name}.{SHARE}") for name in tokens}
    return {names[name]: rare_token_share(rows, idx) for name, rows in tokens.items()}, None


def rare_token_share(rows: dict[int, np.ndarray], idx: np.ndarray) -> np.ndarray:
    """Each ``idx``'s share of real tokens that are rare among ``rows`` (datapoint -> its real tokens), NaN where
    it has none."""
    present = [np.unique(tokens) for tokens in rows.values()]
    ids, held_by = np.unique(np.concatenate(present), return_counts=True) if present else (np.zeros(0), np.zeros(0))
    rare_ids = ids[held_by <= max(1.0, RARE_SHARE * len(rows))]
    shares = np.full(len(idx), np.nan)
    for row, datapoint in enumerate(idx.tolist()):
        tokens = rows.get(datapoint)
        if tokens is not None and len(tokens):
            shares[row] = float(np.isin(tokens, rare_ids).mean())
    return shares


def _captured_tokens(pages: DebugOutputs) -> dict[str, dict[int, np.ndarray]]:
    """Input name -> datapoint -> its real tokens, for the token inputs of the first datapoint (none: the rest is
    not read)."""
    found: dict[str, dict[int, np.ndarray]] = {}
    masks: dict[str, Optional[str]] = {}
    for datapoint, record in pages.page_by_page():
        inputs = _inputs(record)
        if not masks:
            masks = {name: _mask_of(name, inputs) for name in token_inputs(inputs)}
            if not masks:
                return {}
        for name, mask in masks.items():
            tokens = inputs.get(name)
            if _is_tokens(tokens):
                shown = inputs.get(mask) if mask else None
                usable = isinstance(shown, np.ndarray) and shown.shape == tokens.shape
                found.setdefault(name, {})[datapoint] = tokens[shown.astype(bool)] if usable else tokens
    for name, mask in masks.items():
        if mask is None and name in found:
            found[name] = _without_padding(found[name])
    return found


def _inputs(record: Any) -> dict[str, Any]:
    """A captured datapoint's inputs by name (a bare array is ``inputs``)."""
    inputs = record.get("inputs") if isinstance(record, dict) else None
    return inputs if isinstance(inputs, dict) else {"inputs": inputs}


def token_inputs(inputs: dict[str, Any]) -> list[str]:
    """The names of the token inputs among one datapoint's ``inputs`` (the module docstring's rule)."""
    return [name for name, value in inputs.items() if "mask" not in str(name).lower() and _is_tokens(value)
            and len(value) >= MIN_LENGTH and bool((value > 1).any())]


def _is_tokens(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind in "iu" and len(value) > 0 \
        and int(value.min()) >= 0


def _mask_of(name: str, inputs: dict[str, Any]) -> Optional[str]:
    """The input that marks ``name``'s real tokens: a 0/1 array of its shape named a mask; None without one."""
    shape = inputs[name].shape
    for other, value in inputs.items():
        if "mask" in str(other).lower() and isinstance(value, np.ndarray) and value.shape == shape \
                and value.dtype.kind in "biu" and np.isin(value, (0, 1)).all():
            return other
    return None


def _without_padding(rows: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Each datapoint's tokens without the trailing run of the id that ends the most datapoints (the padding)."""
    ends, counts = np.unique([int(tokens[-1]) for tokens in rows.values()], return_counts=True)
    pad = ends[int(np.argmax(counts))]
    trimmed = {}
    for datapoint, tokens in rows.items():
        real = np.flatnonzero(tokens != pad)
        trimmed[datapoint] = tokens[:real[-1] + 1] if len(real) else tokens[:0]
    return trimmed

"""Which columns of an epoch table are what, for the failure analysis.

- **Meta info**: what the data says about a datapoint (its meta-info fields, its label and other labels): what a
  user can change in the data. Slices and separating quantities over it are ranked on their own.
- **Internals**: the debuggers' summaries: what the model does. Per-unit columns of one debugger (``energy.c0`` ...
  ``energy.c63``, ``entropy_head3``) form a family (``energy.c*``): it counts once in the ranking and in the
  multiple-testing correction; units that are near-identical on every datapoint are merged into one.
- **Restatements of the failure**: the prediction, columns a debugger declares as outcomes
  (``BaseDebugger.summary_roles``) and columns the model's output predicts (``analysis/outcomes.py``): never a
  slice condition or a separating quantity, listed apart.
- **Inputs**: columns derived from the captured inputs themselves (``input:rare_token_share``,
  ``analysis/rare_tokens.py``): what no meta column records and no feature space of the model shows. Ranked on
  their own too: such a cause ranks among the meta causes as the strongest of them do, and it is another kind of fix
  (the vocabulary, the tokeniser, the training data's words).
- Never analysed: ``idx``, the scores (the failure is defined from them), the probabilities.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from analysis.findings import Restatement
from analysis.rare_tokens import PREFIX as INPUT_PREFIX

NEVER = ("idx", "probabilities", "logsumexp")
PREDICTION = ("prediction", "prediction_name")
LABEL = ("label", "label_name")
UNIT = re.compile(r"\d+$")  # the number that ends a per-unit column's name
NEAR_IDENTICAL = 0.999  # rank correlation above which two units of a family are one
SAMPLE_ROWS = 5000


@dataclass
class Columns:
    """The analysed columns of one table, by family, with what ties them together."""

    meta: dict[str, np.ndarray]
    internals: dict[str, np.ndarray]
    families: dict[str, str] = field(default_factory=dict)  # internal column -> its family of units
    same_as: dict[str, list[str]] = field(default_factory=dict)  # kept unit -> near-identical units merged into it
    restatements: list[Restatement] = field(default_factory=list)
    label_copies: frozenset[str] = frozenset()  # meta columns that say the label (a slice holds one at most)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)  # derived from the captured inputs


def unit_family(name: str) -> Optional[str]:
    """``energy.c*`` for ``energy.c12``; None for a column that does not end in a unit number."""
    return UNIT.sub("*", name) if UNIT.search(name) else None


def split_columns(values: dict[str, np.ndarray], roles: dict, declared: dict[str, str]) -> Columns:
    """The table's analysed columns (``values``, every scalar column) by family; ``declared``: column -> why it
    restates the outcome (declared by its debugger)."""
    scores, summaries = set(roles.get("scores", [])), set(roles.get("summaries", []))
    meta, internals, inputs, restatements = {}, {}, {}, []
    named = "label_name" in values  # the label by its class name: its number says the same, less readably
    for name, column in values.items():
        if name in NEVER or name in scores or name in PREDICTION or column.ndim != 1 or (named and name == "label"):
            continue
        if name in declared:
            restatements.append(Restatement(name, declared[name]))
        elif name in summaries:
            internals[name] = column
        elif name.startswith(INPUT_PREFIX):
            inputs[name] = column
        else:
            meta[name] = column
    families = _unit_families(internals)
    kept, same_as = merge_near_identical(internals, families)
    copies = {name for name, column in meta.items() if any(
        key in values and column.dtype == values[key].dtype and np.array_equal(column, values[key]) for key in LABEL)}
    return Columns(meta, kept, {name: families[name] for name in kept if name in families}, same_as, restatements,
                   frozenset(copies | set(LABEL)), inputs)


def _unit_families(columns: dict[str, np.ndarray]) -> dict[str, str]:
    """Column -> family for the columns whose family has at least two members."""
    members: dict[str, list[str]] = {}
    for name in columns:
        family = unit_family(name)
        if family is not None:
            members.setdefault(family, []).append(name)
    return {name: family for family, names in members.items() if len(names) > 1 for name in names}


def merge_near_identical(columns: dict[str, np.ndarray], families: dict[str, str], seed: int = 0
                         ) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """The columns with near-identical units of a family merged into the first (same missing values and a rank
    correlation above NEAR_IDENTICAL on a sample of rows), and which units each kept one stands for."""
    by_family: dict[str, list[str]] = {}
    for name, family in families.items():
        by_family.setdefault(family, []).append(name)
    rows = len(next(iter(columns.values()))) if columns else 0
    sample = np.arange(rows) if rows <= SAMPLE_ROWS else \
        np.sort(np.random.default_rng(seed).choice(rows, SAMPLE_ROWS, replace=False))
    dropped: set[str] = set()
    same_as: dict[str, list[str]] = {}
    for names in by_family.values():
        ranks = {name: _ranks(columns[name][sample]) for name in names}
        for i, name in enumerate(names):
            if name in dropped or ranks[name] is None:
                continue
            for other in names[i + 1:]:
                if other not in dropped and ranks[other] is not None and _alike(ranks[name], ranks[other]):
                    dropped.add(other)
                    same_as.setdefault(name, []).append(other)
    return {name: column for name, column in columns.items() if name not in dropped}, same_as


def _ranks(values: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """(missing mask, standardised ranks of the rest), None for a constant column."""
    if values.dtype == object or values.dtype.kind == "b":
        return None
    numbers = values.astype(np.float64)
    absent = ~np.isfinite(numbers)
    present = numbers[~absent]
    if len(present) < 3 or np.ptp(present) == 0:
        return None
    ranks = np.argsort(np.argsort(present)).astype(np.float64)
    return absent, (ranks - ranks.mean()) / ranks.std()


def _alike(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return bool(np.array_equal(a[0], b[0]) and float(np.mean(a[1] * b[1])) >= NEAR_IDENTICAL)

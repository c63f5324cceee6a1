"""Confirming a finding by intervention: what is patched, on which datapoints, and how the result is judged.

A finding says that some datapoints fail more than the rest and names what sets them apart: units of a layer
(channels, features, attention heads), a module where NaN appears, or a part of the input. Only an intervention
tells a cause from a correlate. ``runners/verify.py`` reruns the epoch's model on the finding's datapoints with the
named part replaced by its mean over passing datapoints (``UnitPatch``, ``InputMask``; token ids by padding), a
subgroup moved onto the passing datapoints in its feature space (``UnitShift``) or a segmentation's prompt moved
into its object (``PromptMove``), and on a random set matched to them
(``matched_control``: as many failing and as many passing datapoints, drawn from outside the finding).
This module holds the pure parts: the plan, the control and reference draws, the failure rule applied to the
rerun's outputs, and the statistics.

Statistics: each datapoint of a set passed or failed in the epoch and passes or fails after the intervention:
four counts (``OutcomeCounts``). The change in failure rate is P(pass→fail) − P(fail→pass): the set's passing
share times the share of its passing datapoints broken, less its failing share times the share of its failing
ones fixed. The two shares are uncertain, the set's composition is not: their Beta posteriors under a uniform
prior (``DRAWS`` draws with a fixed seed) give the change's 95% interval, which stays honest at the extremes
where a plain bootstrap collapses (39 of 39 fixed gives [-1, -0.91], as the exact Clopper-Pearson interval does,
not [-1, -1]). The control's shares are applied to the finding's composition (a finding usually holds more
failures than the rest of the epoch, so its control has fewer failing datapoints than it); the effect is the
finding's change minus that, drawn from the two independent posteriors. Verdicts (``judge``):

- **correlational**: it leaves the finding's failures in place, or removes no more of them than of the
  control's (the finding's change, or the effect, is above -``MIN_EFFECT`` at 95%), checked first: a sure but
  small effect leaves the finding's failures where they were;
- **confirmed**: otherwise, the intervention lowers the finding's failure rate, and lowers it more than the
  control's (both intervals below 0);
- **inconclusive**: neither can be told at this size (the effect's interval spans both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np

from analysis.epoch_table import FAILURE_DEFINITION_ROLE, EpochTable
from analysis.failures import AnalysisError, FailureDefinition, worst_rows

CONFIRMED, CORRELATIONAL, INCONCLUSIVE = "confirmed", "correlational", "inconclusive"
MIN_EFFECT = 0.1  # a change of failure rate under 10 points at 95% is no cause of the finding's failures
LEVEL = 0.95
DRAWS = 20_000
REFERENCE_SIZE = 32  # passing datapoints whose mean replaces the patched part


UNITS, HEADS = "units", "heads"
MEAN, PADDING = "mean", "padding"


@dataclass(frozen=True)
class UnitPatch:
    """Replace units of ``module``'s output by their mean over passing datapoints: ``channels`` only (all when
    None), and with ``nonfinite_only`` only where they are NaN or infinite (a NaN origin).

    Units lie along the output's unit dim (``debuggers/feature_layout.py``: dim 1 of a conv layer's output, the last
    of a (B, T, D) one). A conv layer's units take their element-wise mean (a map per channel); tokens their mean
    over real tokens (one value per unit, whatever the sequence's length). ``kind=HEADS``: ``channels`` are
    attention heads of ``module``, each the slice of the heads' concatenation its output projection reads."""

    module: str
    channels: Optional[tuple[int, ...]] = None
    nonfinite_only: bool = False
    kind: str = UNITS

    def describe(self) -> str:
        name = "head" if self.kind == HEADS else "unit"
        where = f"every {name}" if self.channels is None else \
            f"{name}{'s' if len(self.channels) > 1 else ''} {', '.join(map(str, self.channels[:12]))}" \
            f"{f' ... ({len(self.channels)})' if len(self.channels) > 12 else ''}"
        what = "NaN/Inf values" if self.nonfinite_only else "output"
        return f"{self.module}: {where}, {what} set to the passing mean"


@dataclass(frozen=True)
class UnitShift:
    """Add ``offsets`` (one per unit of ``channels``) to ``module``'s output at every position: a subgroup moved onto
    the passing datapoints' mean in the space it was found in (the units' means over their positions), each
    datapoint keeping its own variation about it."""

    module: str
    channels: tuple[int, ...]
    offsets: tuple[float, ...]
    kind: str = UNITS

    def describe(self) -> str:
        shown = ", ".join(map(str, self.channels[:12])) + (f" ... ({len(self.channels)})" if len(self.channels) > 12
                                                            else "")
        size = float(np.mean(np.abs(self.offsets))) if self.offsets else 0.0
        return f"{self.module}: units {shown} shifted onto the passing datapoints' mean (by {size:.3g} on average)"


@dataclass(frozen=True, eq=False)
class InputMask:
    """Replace input ``input_key`` inside ``region`` by its mean over passing datapoints, or, with ``fill=PADDING``
    (token ids), by padding: the batch's padding token, its attention mask 0.

    ``region``: bool over the input's last ``region.ndim`` dims (from their start): a window of a signal or a span
    of tokens (1-D), a region of an image (2-D), of a volume (3-D)."""

    input_key: str
    region: np.ndarray
    fill: str = MEAN

    def describe(self) -> str:
        where = np.nonzero(self.region)
        unit = {1: "token" if self.fill == PADDING else "position", 2: "pixel", 3: "voxel"}[self.region.ndim]
        names = {1: ("",), 2: ("rows ", "columns "), 3: ("depth ", "rows ", "columns ")}[self.region.ndim]
        ranges = ", ".join(f"{name}{axis.min()}-{axis.max()}" for name, axis in zip(names, where)) \
            if self.region.ndim > 1 or len(where[0]) > 8 else ", ".join(map(str, where[0]))
        what = "replaced by padding" if self.fill == PADDING else "set to the passing mean"
        return f"input '{self.input_key}': {len(where[0])} {unit}{'s' if len(where[0]) > 1 else ''} ({ranges}) {what}"


@dataclass(frozen=True)
class PromptMove:
    """Move each datapoint's point prompt (``inputs[point_key]``, (x, y) in pixels) to the pixel of its target
    (``labels[mask_key]``) farthest from the target's edge: the prompt where the object is surest."""

    point_key: str
    mask_key: str

    def describe(self) -> str:
        return f"input '{self.point_key}': the prompt moved to the point of the target '{self.mask_key}' farthest " \
               "from its edge"


Intervention = Union[UnitPatch, UnitShift, InputMask, PromptMove]


@dataclass
class InterventionPlan:
    """What to do for one finding: which datapoints, and what to patch (``why``: how it was read off the finding).

    ``replication``: the finding's held-out replication, run where the intervention does not confirm it. For an
    intervention the finding does not name (a Grad-CAM region, a moved prompt, a subgroup's shift: ``named`` False)
    it gives the verdict: the failures may have another cause than the part tried. For one it names (its units) the
    verdict stays the intervention's, the replication said beside it: "correlational" says the units are no cause,
    the replication whether the finding is real all the same (its cause upstream of them)."""

    key: str
    finding: str
    idx: list[int]
    intervention: Intervention
    why: str
    replication: Any = None  # analysis.replication.ReplicationPlan
    named: bool = True


class OfPlan:
    """A result's key and finding: those of the plan (``plan``) it carried out."""

    plan: Any

    @property
    def key(self) -> str:
        return self.plan.key

    @property
    def finding(self) -> str:
        return self.plan.finding


@dataclass
class NotVerifiable:
    """A finding no intervention can test, and why."""

    key: str
    finding: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "finding": self.finding, "verdict": None, "rests_on": None, "reason": self.reason}


# ----------------------------------------------------------------------------------------------- the sets
def matched_control(table_idx: np.ndarray, failed: np.ndarray, finding_idx: np.ndarray,
                    rng: np.random.Generator, size: Optional[int] = None) -> np.ndarray:
    """``size`` datapoints (default: as many as the finding) drawn at random from outside the finding, failing and
    passing in the finding's shares (all there are when outside holds fewer), sorted. Matching on the outcome is
    what makes the comparison fair: a patch that wipes out a layer fixes a share of any failures, and breaks a
    share of any passes."""
    inside = np.isin(table_idx, finding_idx)
    failing = int((inside & failed).sum())
    total = int(inside.sum())
    size = total if size is None else size
    wanted = {True: round(failing * size / total) if total else 0}
    wanted[False] = size - wanted[True]
    chosen = []
    for outcome in (True, False):
        pool = table_idx[~inside & (failed == outcome)]
        chosen.append(rng.choice(pool, size=min(wanted[outcome], len(pool)), replace=False))
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def control_size(finding_size: int, reference_size: int = REFERENCE_SIZE) -> int:
    """As many as the finding, less the reference where the finding holds at least twice as many: the reference's
    unpatched pass is then paid for by a smaller control, and a verification reruns twice the finding's datapoints
    (a verification must cost at most twice the time of evaluating them). The control is compared at the finding's
    composition (``compare``), so its size sets only the width of its interval."""
    return finding_size - reference_size if finding_size >= 2 * reference_size else finding_size


def passing_reference(table_idx: np.ndarray, failed: np.ndarray, finding_idx: np.ndarray, control_idx: np.ndarray,
                      rng: np.random.Generator, size: int = REFERENCE_SIZE) -> np.ndarray:
    """Up to ``size`` passing datapoints outside the finding, whose mean replaces the patched part: the control's
    passing ones first (they are loaded anyway), then others at random."""
    passing = table_idx[~failed & ~np.isin(table_idx, finding_idx)]
    in_control = passing[np.isin(passing, control_idx)]
    others = passing[~np.isin(passing, control_idx)]
    first = rng.choice(in_control, size=min(size, len(in_control)), replace=False)
    rest = rng.choice(others, size=min(size - len(first), len(others)), replace=False)
    return np.sort(np.concatenate([first, rest])).astype(np.int64)


# --------------------------------------------------------------------------------------- the failure rule
@dataclass(frozen=True)
class FailureRule:
    """The epoch's failure definition (``FailureDefinition``), applied to a rerun's outputs.

    ``metric=None``: a wrong prediction (no prediction, from logits that are not all finite, is wrong).
    Otherwise a score at or beyond the epoch's cut fails (beyond it only, when ``ties_fail`` is False), as does
    a missing score.
    """

    metric: Optional[str]
    cut: Optional[float] = None  # in badness: the score itself when lower is better, its negation otherwise
    ties_fail: bool = True
    higher_is_better: bool = True

    def failed(self, scores: dict[str, np.ndarray], label: Optional[np.ndarray],
               prediction: Optional[np.ndarray]) -> np.ndarray:
        if self.metric is None:
            return ~(prediction == label)  # NaN (no prediction) equals nothing
        values = np.asarray(scores[self.metric], dtype=np.float64)
        badness = -values if self.higher_is_better else values
        if self.cut is None:  # the epoch's failures were the datapoints without a score
            return np.isnan(badness)
        beyond = badness >= self.cut if self.ties_fail else badness > self.cut
        return np.isnan(badness) | beyond


def failure_rule(table: EpochTable, definition: FailureDefinition) -> tuple[FailureRule, np.ndarray]:
    """The rule ``definition`` applies to ``table``, and the rows it makes fail (``definition.failed``'s): the run's
    own ``failure_definition`` where ``definition`` names no metric and the run named one."""
    named = table.roles.get(FAILURE_DEFINITION_ROLE)
    if definition.metric is None and isinstance(named, dict) and isinstance(named.get("metric"), str):
        definition = FailureDefinition(named["metric"], named["worst_fraction"])
    names = [name for name, _ in table.columns()]
    present = [name for name in ("label", "prediction") if name in names]
    values = table.values(present) if present else {}
    failed, _ = definition.failed(table, values)
    if definition.metric is None and "label" in values and "prediction" in values:
        return FailureRule(None), failed
    metric = definition.metric or (table.roles.get("scores") or [None])[0]
    higher_is_better = table.roles.get("higher_is_better", {}).get(metric, True)
    scores = table.values([metric])[metric].astype(np.float64)
    _, cut, ties = worst_rows(-scores if higher_is_better else scores, definition.worst_fraction)
    return FailureRule(metric, cut, ties, higher_is_better), failed


# ------------------------------------------------------------------------------------------- statistics
@dataclass
class OutcomeCounts:
    """A set's datapoints by their outcome in the epoch and after the intervention."""

    stayed_passing: int
    broken: int  # passed, fail after
    fixed: int  # failed, pass after
    stayed_failing: int

    @classmethod
    def of(cls, before: np.ndarray, after: np.ndarray) -> OutcomeCounts:
        before, after = np.asarray(before, bool), np.asarray(after, bool)
        return cls(int((~before & ~after).sum()), int((~before & after).sum()), int((before & ~after).sum()),
                   int((before & after).sum()))

    @property
    def size(self) -> int:
        return self.stayed_passing + self.broken + self.fixed + self.stayed_failing

    @property
    def failures_before(self) -> int:
        return self.fixed + self.stayed_failing

    @property
    def failures_after(self) -> int:
        return self.broken + self.stayed_failing

    @property
    def change(self) -> float:
        """The change in failure rate (after minus before)."""
        return (self.broken - self.fixed) / self.size if self.size else math.nan

    @property
    def passing_before(self) -> int:
        return self.stayed_passing + self.broken

    def change_draws(self, rng: np.random.Generator, composition: Optional[OutcomeCounts] = None,
                     draws: int = DRAWS) -> np.ndarray:
        """Draws of the change in failure rate of a set of ``composition``'s failing and passing counts (this
        set's own by default) under this set's shares fixed (of its failing) and broken (of its passing), each
        from its Beta posterior under a uniform prior. The composition is known, not drawn: only the shares are
        uncertain."""
        of = composition or self
        fixed = rng.beta(self.fixed + 1, self.stayed_failing + 1, size=draws)
        broken = rng.beta(self.broken + 1, self.stayed_passing + 1, size=draws)
        return (of.passing_before * broken - of.failures_before * fixed) / of.size


@dataclass
class Interval:
    low: float
    high: float

    def __str__(self) -> str:
        return f"[{self.low:+.2f}, {self.high:+.2f}]"


@dataclass
class Comparison:
    """The finding's and the control's change in failure rate, their difference (the effect), and the verdict."""

    finding: OutcomeCounts
    control: OutcomeCounts
    finding_interval: Interval
    control_change: float  # the control's shares fixed and broken, applied to the finding's composition
    control_interval: Interval
    effect: float
    effect_interval: Interval
    verdict: str
    reason: str = field(default="")


def compare(finding: OutcomeCounts, control: OutcomeCounts, seed: int = 0) -> Comparison:
    """The intervention's effect on the finding against the matched control, with 95% intervals and the verdict.

    The control is compared at the finding's composition: its shares fixed and broken applied to the finding's
    failing and passing counts. A control with fewer failing datapoints than the finding (all there are outside
    it) would otherwise gain less from a patch that fixes any failure, and that alone would read as an effect;
    with few failing datapoints in the control, its share fixed is uncertain and the effect's interval says so.
    """
    if not finding.size or not control.size:
        raise AnalysisError("a finding and its control need at least one datapoint each to be compared")
    rng = np.random.default_rng(seed)
    found, matched = finding.change_draws(rng), control.change_draws(rng, composition=finding)
    intervals = [_interval(draws) for draws in (found, matched, found - matched)]
    verdict, reason = judge(intervals[0], intervals[2])
    control_change = float(np.median(matched))
    return Comparison(finding, control, intervals[0], control_change, intervals[1], finding.change - control_change,
                      intervals[2], verdict, reason)


def judge(finding: Interval, effect: Interval) -> tuple[str, str]:
    """The verdict from the finding's change and the effect (finding minus control), with its reason. An effect
    sure to be there but sure to be under ``MIN_EFFECT`` is correlational: the finding's failures stay."""
    if finding.low > -MIN_EFFECT:
        return CORRELATIONAL, (f"the intervention leaves the finding's failures in place (it removes less than "
                               f"{MIN_EFFECT:.0%} of the datapoints' failures, at {LEVEL:.0%})")
    if effect.low > -MIN_EFFECT:
        return CORRELATIONAL, "the intervention removes no more failures here than on a matched random set"
    if finding.high < 0 and effect.high < 0:
        return CONFIRMED, "the intervention removes failures of the finding, more than of a matched random set"
    return INCONCLUSIVE, (f"the interval of the effect beyond the matched random set spans both none and more than "
                          f"{MIN_EFFECT:.0%} of failures: more datapoints (a larger epoch) would tell")


def _interval(draws: np.ndarray) -> Interval:
    tail = (1 - LEVEL) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return Interval(float(low), float(high))

"""What the failure analysis finds, as plain data: every kind of finding, and the findings of one epoch as JSON.

Each finding names its datapoints (``idx``) and, in ``target``, what an intervention would act on to confirm it
(``Target``: the meta conditions that select its datapoints, the debugger, layer and units it is about, or the input
region a cam points at): ``python -m runners.analyze --verify`` and the Failures tab's buttons read it.

``Findings.to_dict()`` is JSON-able and ``Findings.from_dict()`` reads it back, checking every field's type: the
background analysis stores an epoch's findings (``save_findings``) and the viewer reads them (``load_findings``)
through ``run_dir.findings_file``: as data, with the run-file guards, while the epoch's table and debug outputs are
as they were when the analysis began. A list of datapoint idx is written as the list itself or,
where shorter, as a bitmap (``{"start": first idx, "bits": base64}``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import math
import types
import typing
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np

from run_dir.errors import FindingsFileError
from run_dir.findings_file import read_findings_file, write_findings_file


@dataclass
class Condition:
    """``column op value``: one condition of a slice or of a meta description.

    ``same_on``: other columns the condition holds for on exactly the same datapoints (units of one family with the
    same missing values, or near-identical units), named once in the finding rather than once per unit.
    """

    column: str
    op: str  # '=', '<', '>=' or 'is null'
    value: Any = None
    same_on: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.op == "is null":
            text = f"{self.column} is null"
        else:
            shown = f"{self.value:.12g}" if isinstance(self.value, float) else str(self.value)
            text = f"{self.column} {self.op} {shown}"
        if self.same_on:
            text += f" (and {len(self.same_on)} other units alike)"
        return text

    def mask(self, values: np.ndarray) -> np.ndarray:
        if self.op == "is null":
            return missing(values)
        if self.op == "=":
            return np.asarray(values == self.value, dtype=bool)
        with np.errstate(invalid="ignore"):
            return values < self.value if self.op == "<" else values >= self.value


def on_the_label_alone(conditions: list[Condition], label_columns: Collection[str]) -> bool:
    """Whether every condition is on a column that copies the label: together they say no more than the class."""
    return all(condition.column in label_columns for condition in conditions)


@dataclass
class MetaMatch:
    """The meta conditions that best match a finding's datapoints, with commensurable scores.

    ``coverage``: the share of the finding's datapoints the conditions hold for ("98% have site = C");
    ``purity``: the share of the datapoints the conditions hold for that are in the finding.
    """

    conditions: list[Condition]
    coverage: float
    purity: float

    @property
    def description(self) -> str:
        return " and ".join(condition.describe() for condition in self.conditions)

    def describe(self) -> str:
        return f"{self.coverage:.0%} have {self.description} ({self.purity:.0%} of those are in it)"


@dataclass
class Target:
    """What an intervention would act on to confirm a finding (``--verify``).

    ``conditions``: meta conditions selecting its datapoints (empty when none describes them); ``debugger``, ``layer``
    and ``units``: the captured quantity it is about (units: channel or head numbers of the layer's output; empty:
    the whole output); ``region``: 'cam' when it is about where the debugger's cam points in the input (mask that).
    """

    conditions: list[Condition] = field(default_factory=list)
    debugger: Optional[str] = None
    layer: Optional[str] = None
    units: list[int] = field(default_factory=list)
    region: Optional[str] = None


@dataclass
class Slice:
    """A group of datapoints described by conditions over one family of columns ('meta', 'internals' or
    'inputs')."""

    conditions: list[Condition]
    size: int
    failures: int
    failure_rate: float
    rest_failure_rate: float
    score: float
    idx: np.ndarray = field(repr=False)
    family: str = "meta"
    also: list[str] = field(default_factory=list)  # other descriptions of the same failures (restatements)
    meta_match: Optional[MetaMatch] = None  # internals: the meta conditions that best match its datapoints
    inside_model: list[str] = field(default_factory=list)  # meta: internal findings of the same datapoints
    nan_origin: Optional[str] = None  # a slice of missing values: the module where NaN first appeared on them
    examples: list[int] = field(default_factory=list)
    target: Target = field(default_factory=Target)
    class_note: Optional[str] = None  # set when it mostly restates one class

    @property
    def description(self) -> str:
        return " and ".join(condition.describe() for condition in self.conditions)


@dataclass
class ClassSlice(Slice):
    """A slice within one class: conditions that make the class fail significantly more than its other datapoints
    (``rest_failure_rate``: the rate of the class's datapoints outside the slice)."""

    label: Condition = field(default_factory=lambda: Condition("label", "="))  # 'label_name = 1'
    class_size: int = 0
    class_failure_rate: float = 0.0

    @property
    def description(self) -> str:
        return f"{super().description} among {self.label.describe()}"


@dataclass
class Confusion:
    """Datapoints of one label that the model reads as another class; ``examples``: its most confident mistakes."""

    label: Any
    prediction: Any
    count: int
    share: float  # of the label's datapoints
    examples: list[int]
    idx: np.ndarray = field(repr=False)

    @property
    def description(self) -> str:
        return f"{self.label} read as {self.prediction}"


@dataclass
class NoSlice:
    """Why a family names no slice: its failures, and the condition that came closest (the smallest p-value against
    its level), with how many failures a slice of its size would need at that level."""

    failures: int
    datapoints: int
    condition: Optional[Condition] = None  # None: no condition holds min_size datapoints (or nothing fails)
    size: int = 0
    inside: int = 0  # its failures
    rest_failure_rate: float = 0.0
    p_value: float = 1.0
    level: float = 0.0
    needed: Optional[int] = None  # failures it would need, the rest as it is (None: more than its size)
    within: Optional[Condition] = None  # the class searched, for slices within a class (its figures are the class's)

    @property
    def description(self) -> str:
        head = f"{self.failures} failures of {self.datapoints}" + (f" among {self.within.describe()}"
                                                                     if self.within else "")
        if self.failures in (0, self.datapoints):
            return f"{head}: nothing tells failures from passes"
        if self.condition is None:
            return f"{head}: no condition holds enough datapoints and fails more than the rest"
        need = f"at least {self.needed} failures" if self.needed is not None else \
            f"more failures than its {self.size} datapoints"
        return (f"{head}: at this level (p < {self.level:.2g}) a slice of {self.size} datapoints needs {need}; "
                f"the closest is {self.condition.describe()}, with {self.inside} of the {self.failures} failures "
                f"({self.inside / max(self.size, 1):.1%} fail against {self.rest_failure_rate:.1%} elsewhere; "
                f"p = {self.p_value:.2g})")


@dataclass
class Twin:
    """A quantity that is nearly another one (rank correlation ``rho``): listed under it, not again."""

    column: str
    rho: float


@dataclass
class UnitScore:
    column: str
    auroc: float


@dataclass
class Separator:
    """A numeric column (or a family of per-unit columns, by its best units) whose values differ between failures
    and passes."""

    column: str  # the column, or the family's name ('layer3_energy.c*')
    auroc: float  # max(auc, 1 - auc): 0.5 separates nothing, 1.0 perfectly
    direction: str  # 'higher in failures' or 'lower in failures'
    rows: int
    units: list[UnitScore] = field(default_factory=list)  # a family: its best units, best first
    family_size: int = 1
    meta_match: Optional[MetaMatch] = None
    target: Target = field(default_factory=Target)
    twins: list[Twin] = field(default_factory=list)  # near-duplicate quantities it stands for
    class_note: Optional[str] = None  # set when it mostly restates one class

    @property
    def twins_description(self) -> str:
        """'twins: aspect (rho +0.99), area (rho +0.91)'; empty without twins."""
        return f"twins: {', '.join(f'{t.column} (rho {t.rho:+.2f})' for t in self.twins)}" if self.twins else ""


@dataclass
class Subgroup:
    """A group of datapoints close together in a captured feature space that fails far more than the rest."""

    debugger: str
    size: int
    failures: int
    failure_rate: float
    rest_failure_rate: float
    idx: np.ndarray = field(repr=False)
    meta_match: Optional[MetaMatch] = None
    examples: list[int] = field(default_factory=list)  # its most typical datapoints
    target: Target = field(default_factory=Target)
    kind: str = "cluster"  # 'cluster': a dense cluster; 'variant': failures that sit together and fail alike
    labels: int = 1  # of a variant: the labels of its datapoints (several: found among what nothing else explains)
    class_note: Optional[str] = None  # set when it mostly restates one class

    @property
    def description(self) -> str:
        return self.meta_match.describe() if self.meta_match else "no meta column describes it"

    @property
    def kind_name(self) -> str:
        """How a reader is told its kind: a cluster, a rare variant, or one of several labels."""
        if self.kind != "variant":
            return "cluster"
        if self.labels <= 1:
            return "rare variant"
        return f"rare variant of {self.labels} labels, among failures nothing else explains"


@dataclass
class TrainingLabelGroup:
    """Datapoints of one label that the model predicts consistently as one other class, among neighbours (in a
    captured feature space) that share their label and fail alike: not noise in the validation labels, which agree
    with their neighbours, but a class the model learnt for them, most often from their training labels
    (``analysis/failure_groups.py``)."""

    debugger: str  # the feature space
    label: Any  # their (validation) label
    predicted: Any  # the class they are predicted as
    size: int
    failures: int
    failure_rate: float
    rest_failure_rate: float
    consistency: float  # the share of its failures predicted as ``predicted``
    confidence: float  # the median probability of ``predicted`` on its failures
    neighbours_agree: float  # the share of its failures' nearest neighbours that carry their label
    idx: np.ndarray = field(repr=False)
    meta_match: Optional[MetaMatch] = None
    examples: list[int] = field(default_factory=list)  # its most typical datapoints
    target: Target = field(default_factory=Target)

    @property
    def description(self) -> str:
        return self.meta_match.describe() if self.meta_match else "no meta column describes it"


@dataclass
class LabelIssue:
    idx: int
    label: Any
    suggested: Any
    self_confidence: float
    mean_confidence: Optional[float] = None  # p(label) over the validation epochs (the data map)
    neighbours_failing: Optional[float] = None  # share of its nearest neighbours (a captured space) that fail
    margin: Optional[float] = None  # p(suggested) - p(label): how confidently the model disagrees
    neighbours_suggest: Optional[float] = None  # share of its nearest neighbours whose label is the suggested class


@dataclass
class SuspectGroup:
    """Suspected label errors that are a systematic subgroup, not label noise: they share a description, a cluster
    or a neighbourhood of failing datapoints."""

    description: str
    why: str  # what ties them together
    size: int
    idx: np.ndarray = field(repr=False)
    meta_match: Optional[MetaMatch] = None
    examples: list[int] = field(default_factory=list)
    target: Target = field(default_factory=Target)


@dataclass
class DataMap:
    """Each datapoint's probability of its label over the validation epochs (dataset cartography): confidence (the
    mean), variability (the standard deviation) and forgetting events (correct, then wrong at the next epoch);
    ``counts``/``failures`` by kind; ``points`` a sample for the chart (all failures first, up to a cap)."""

    epochs: list[int]
    counts: dict[str, int]
    failures: dict[str, int]
    points: dict[str, list[Any]] = field(repr=False)  # idx, confidence, variability, forgetting, kind, failed
    ambiguous: np.ndarray = field(repr=False)  # the idx of each kind but the easy ones
    hard: np.ndarray = field(repr=False)
    still_learning: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    mean_confidence: list[float] = field(default_factory=list)  # every datapoint's mean p(label), per epoch
    note: Optional[str] = None  # what the whole run's trend says (the model still learning)


@dataclass
class Restatement:
    """A column that restates the failure (computed from the model's output): never a slice or a separator."""

    column: str
    why: str


@dataclass
class NaNOrigin:
    module: str
    module_type: str
    count: int
    idx: np.ndarray = field(repr=False)


@dataclass
class DeadUnit:
    column: str
    value: float


@dataclass
class FamilyFindings:
    """Slices and separating quantities of one family of columns."""

    slices: list[Slice] = field(default_factory=list)
    separators: list[Separator] = field(default_factory=list)
    separators_tested: int = 0  # columns (families of units count once) given a Mann-Whitney test
    no_slice: Optional[NoSlice] = None  # why no slice is named, when none is

    def had_columns(self) -> bool:
        """Whether the analysis had columns of this family (a run without token inputs has no inputs' columns):
        a family that had any names a slice or a separating quantity, or says why none."""
        return bool(self.slices or self.separators or self.no_slice is not None)


@dataclass
class Findings:
    table_path: str
    failure_definition: str
    datapoints: int
    failures: int
    meta: FamilyFindings = field(default_factory=FamilyFindings)  # what the data says: what a user can change
    internals: FamilyFindings = field(default_factory=FamilyFindings)  # what the model does
    inputs: FamilyFindings = field(default_factory=FamilyFindings)  # what the captured inputs hold (rare tokens)
    subgroups: list[Subgroup] = field(default_factory=list)
    restatements: list[Restatement] = field(default_factory=list)
    label_issues: list[LabelIssue] = field(default_factory=list)
    suspect_groups: list[SuspectGroup] = field(default_factory=list)
    training_label_groups: list[TrainingLabelGroup] = field(default_factory=list)
    label_issues_note: Optional[str] = None  # why the label suspects are withheld
    data_map: Optional[DataMap] = None
    nan_origins: list[NaNOrigin] = field(default_factory=list)
    dead_units: list[DeadUnit] = field(default_factory=list)
    confusion: Optional[dict[str, Any]] = None  # {'classes': [...], 'class_ids': [...], 'matrix': [[...]]}
    confusions: list[Confusion] = field(default_factory=list)  # the largest off-diagonal cells, largest first
    class_slices: list[ClassSlice] = field(default_factory=list)  # conditions that make one class fail more
    class_no_slice: Optional[NoSlice] = None  # none within a class: the class and condition that came closest
    notes: list[str] = field(default_factory=list)  # what was left out, and why

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data; each slice, subgroup and meta match also gets its ``description``."""
        return _plain(self)

    @classmethod
    def from_dict(cls, data: Any) -> Findings:
        """Findings back from ``to_dict()``'s data; ``FindingsFileError`` naming the first field that is not right."""
        return _build(cls, data, "findings")


def save_findings(epoch_dir: str, findings: Findings, signature: list) -> None:
    """``findings`` as the epoch's findings file, with the ``epoch_signature`` its inputs had when the analysis
    began: findings of an epoch whose table or debug outputs changed since are not read back."""
    write_findings_file(epoch_dir, findings.to_dict(), signature)


def load_findings(epoch_dir: str) -> Optional[Findings]:
    """The stored findings of ``epoch_dir`` when its inputs are as they were then, else None (none stored, stale,
    or of another format). ``RunFileError`` when the file is not one Lantern wrote."""
    stored = read_findings_file(epoch_dir)
    return None if stored is None else Findings.from_dict(stored)


def missing(values: np.ndarray) -> np.ndarray:
    """None or NaN (the table's null)."""
    if values.dtype == object:
        return np.array([v is None or (isinstance(v, float) and math.isnan(v)) for v in values], dtype=bool)
    return np.isnan(values) if values.dtype.kind == "f" else np.zeros(len(values), dtype=bool)


# ---------------------------------------------------------------- JSON
def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        plain = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if hasattr(type(value), "description"):
            plain["description"] = value.description
        return plain
    if isinstance(value, np.ndarray):
        return encode_idx(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def encode_idx(idx: np.ndarray) -> Union[list[int], dict[str, Any]]:
    """Sorted idx as a list, or as a bitmap over ``start .. max`` where that is shorter (a large group)."""
    idx = np.unique(np.asarray(idx, dtype=np.int64))
    if len(idx) < 64:
        return idx.tolist()
    start = int(idx[0])
    bits = np.zeros(int(idx[-1]) - start + 1, dtype=bool)
    bits[idx - start] = True
    packed = np.packbits(bits)
    if len(packed) * 4 // 3 > len(idx) * 7:  # the list is shorter (idx spread thinly)
        return idx.tolist()
    return {"start": start, "count": len(bits), "bits": base64.b64encode(packed.tobytes()).decode("ascii")}


def decode_idx(data: Any, where: str) -> np.ndarray:
    if isinstance(data, list) and all(type(v) is int for v in data):
        return np.asarray(data, dtype=np.int64)
    if isinstance(data, dict) and type(data.get("start")) is int and type(data.get("count")) is int \
            and isinstance(data.get("bits"), str) and data["count"] >= 0:
        try:
            packed = np.frombuffer(base64.b64decode(data["bits"], validate=True), dtype=np.uint8)
        except (binascii.Error, ValueError):
            packed = None
        if packed is not None and len(packed) == -(-data["count"] // 8):
            return np.flatnonzero(np.unpackbits(packed)[:data["count"]]) + data["start"]
    raise FindingsFileError(f"{where} is not a list of datapoint idx Lantern writes")


def _build(kind: Any, data: Any, where: str) -> Any:
    """``data`` as a value of the annotated type ``kind`` (dataclasses, lists, dicts, Optional, plain values)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return data
    if origin in (Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        return _build(next(arg for arg in args if arg is not type(None)), data, where)
    if kind is np.ndarray:
        return decode_idx(data, where)
    if dataclasses.is_dataclass(kind):
        if not isinstance(data, dict):
            raise FindingsFileError(f"{where} is not an object")
        hints = typing.get_type_hints(kind)
        values = {}
        for f in dataclasses.fields(kind):
            if f.name in data:
                values[f.name] = _build(hints[f.name], data[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise FindingsFileError(f"{where} has no {f.name!r}")
        return kind(**values)
    if origin is list:
        if not isinstance(data, list):
            raise FindingsFileError(f"{where} is not a list")
        return [_build(args[0], item, f"{where}[{i}]") for i, item in enumerate(data)]
    if origin is dict:
        if not isinstance(data, dict):
            raise FindingsFileError(f"{where} is not an object")
        return {key: _build(args[1], value, f"{where}.{key}") for key, value in data.items()}
    if kind is float:
        if data is None:
            return math.nan
        if type(data) in (int, float):
            return float(data)
    elif kind is int and type(data) is int or kind is str and isinstance(data, str) \
            or kind is bool and type(data) is bool:
        return data
    raise FindingsFileError(f"{where} is not {_KIND_NAMES.get(kind, getattr(kind, '__name__', str(kind)))}")


_KIND_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}

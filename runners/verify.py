"""Confirm findings by intervention on the epoch's own model: ``python -m runners.analyze --run RUN --verify``.

For each finding that ``analysis.finding_plans`` turns into a plan (a unit or NaN module to patch, or an input
region to mask; ``analysis/intervention.py`` says how the result is judged):

1. draw the matched control (the finding's failing and passing shares, from outside the finding: as many
   datapoints, less the reference's where the finding holds twice as many, ``control_size``) and the passing
   reference (the control's passing datapoints first), with a fixed seed;
2. run the reference through the rebuilt model unpatched: the mean of the patched module's output (a forward
   hook sums it) or of the masked input, and a check that the model reproduces the epoch (the reference passed
   in the epoch and must still pass);
3. run the finding and the control in one pass with the patch (a forward hook that returns the patched output,
   or the masked inputs), and judge each datapoint by the epoch's own failure definition;
4. compare the finding's change in failure rate with the control's.

The model is rebuilt once per call (``runners/run_model.py``: only with ``--trust-configs``).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from itertools import chain
from typing import Any, Optional, Union

import numpy as np
import torch

from analysis.epoch_table import EPOCH_TABLE_FILE, EpochTable
from analysis.failures import FailureDefinition
from analysis.finding_plans import NOT_VERIFIABLE, RunFacts, cam_region, finding_entries, plan_for_finding
from analysis.intervention import (
    Comparison,
    FailureRule,
    InputMask,
    Intervention,
    InterventionPlan,
    NotVerifiable,
    OutcomeCounts,
    UnitPatch,
    compare,
    control_size,
    failure_rule,
    matched_control,
    passing_reference,
)
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.pages.errors import DebugDataError
from debuggers.pages.reader import load_debug_outputs
from debuggers.utils import compiled_hint, require_layer
from metrics.classification_metric import predicted_classes
from runners.run_model import EpochModel
from utils.builders import build_from_config
from utils.errors import LanternUserError, ModelContractError
from utils.keyed import label, model_output
from utils.ops import apply_tensor_op, describe_value, idx_list

MAX_NOT_REPRODUCED = 0.1  # share of the reference (passing in the epoch) allowed to fail in the rebuilt model
KEEP_BYTES = 128 * 2**20  # loaded reference batches kept for the patched run (they hold control datapoints)

Progress = Callable[[str], None]


class VerifyError(LanternUserError):
    """A finding cannot be verified as asked; the message says why and what to do."""


@dataclass
class Verification:
    """One finding's intervention and what it did, against the matched control."""

    plan: InterventionPlan
    control_idx: list[int]  # the matched random set
    reference_idx: list[int]  # the passing datapoints the mean was taken over
    comparison: Comparison
    seconds: float

    @property
    def key(self) -> str:
        return self.plan.key

    @property
    def finding(self) -> str:
        return self.plan.finding

    @property
    def intervention(self) -> str:
        return self.plan.intervention.describe()

    @property
    def verdict(self) -> str:
        return self.comparison.verdict

    def to_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {"key": self.key, "finding": self.finding, "intervention": self.intervention, "why": self.plan.why,
                "verdict": c.verdict, "reason": c.reason, "seconds": self.seconds, "idx": self.plan.idx,
                "control_idx": self.control_idx, "reference_idx": self.reference_idx,
                "finding_counts": vars(c.finding), "control_counts": vars(c.control),
                "change": c.finding.change, "change_interval": [c.finding_interval.low, c.finding_interval.high],
                "control_change": c.control_change,
                "control_change_interval": [c.control_interval.low, c.control_interval.high],
                "effect": c.effect, "effect_interval": [c.effect_interval.low, c.effect_interval.high]}


Result = Union[Verification, NotVerifiable]


def verify_findings(epoch_dir: str, findings: dict[str, Any], keys: Optional[list[str]] = None,
                    trust_configs: bool = False, failure: Optional[FailureDefinition] = None, seed: int = 0,
                    cancel: Optional[threading.Event] = None, progress: Optional[Progress] = None) -> list[Result]:
    """Verify the findings ``keys`` (``slices-0``, ...; None: every finding but label suspects and dead units) of
    ``findings`` (``Findings.to_dict()`` of ``epoch_dir``), in that order."""
    entries = _chosen(finding_entries(findings), keys)
    table = EpochTable(os.path.join(epoch_dir, EPOCH_TABLE_FILE))
    rule, failed = failure_rule(table, failure or FailureDefinition())
    model = EpochModel.rebuild(epoch_dir, trust_configs)
    facts = run_facts(table, failed, model, epoch_dir)
    results: list[Result] = []
    for key, finding in entries:
        plan = plan_for_finding(key, finding, facts)
        results.append(plan if isinstance(plan, NotVerifiable)
                       else verify_plan(model, plan, rule, facts, seed, cancel, progress))
    return results


def run_facts(table: EpochTable, failed: np.ndarray, model: EpochModel, epoch_dir: str) -> RunFacts:
    """What the adapter needs of the run: the table's idx and failures, summaries, the debuggers' layers and
    the captured Grad-CAM."""
    table_idx = table.values(["idx"])["idx"].astype(np.int64)
    layers, cams = {}, []
    for name, debugger in _debuggers(model.config):
        hooked = debugger.layer_names()
        if len(hooked) == 1:
            layers[name] = hooked[0]
        if isinstance(debugger, GradCAMDebugger):
            cams.append((name, debugger.input_key))
    region = None
    if cams:
        try:
            outputs = load_debug_outputs(epoch_dir)
        except DebugDataError:  # unreadable pages: findings name no region then
            outputs = None
        region = partial(cam_region, outputs, *cams[0]) if outputs is not None else None  # None: no pages
    return RunFacts(table_idx, failed, frozenset(table.roles.get("summaries", [])), layers,
                    lambda column: table.values([column])[column], region)


def verify_plan(model: EpochModel, plan: InterventionPlan, rule: FailureRule, facts: RunFacts, seed: int = 0,
                cancel: Optional[threading.Event] = None, progress: Optional[Progress] = None) -> Result:
    """The plan's intervention on the finding and on a matched control, compared."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    finding = np.asarray(plan.idx, dtype=np.int64)
    control = matched_control(facts.table_idx, facts.failed, finding, rng, control_size(len(finding)))
    reference = passing_reference(facts.table_idx, facts.failed, finding, control, rng)
    if not len(control) or not len(reference):
        return NotVerifiable(plan.key, plan.finding, "no datapoint outside the finding to compare with, or none "
                                                     "that passes to take the mean over")
    _say(progress, f"{plan.key}: the mean over {len(reference)} passing datapoints")
    mean, kept = reference_mean(model, plan.intervention, reference, rule, control, cancel)
    _say(progress, f"{plan.key}: {len(finding)} datapoints and {len(control)} of the control, patched")
    loaded = np.concatenate([idx_list(batch["meta_info"]["idx"]) for batch in kept] or [[]]).astype(np.int64)
    rest = np.setdiff1d(np.union1d(finding, control), loaded)
    after = dict(patched_outcomes(model, plan.intervention, mean, chain(kept, model.batches(rest, cancel)), rule))
    before = dict(zip(facts.table_idx.tolist(), facts.failed.tolist()))
    counts = [OutcomeCounts.of(np.array([before[i] for i in rows]), np.array([after[i] for i in rows]))
              for rows in (finding.tolist(), control.tolist())]
    return Verification(plan, control.tolist(), reference.tolist(), compare(*counts, seed=seed),
                        time.perf_counter() - start)


def reference_mean(model: EpochModel, intervention: Intervention, reference: np.ndarray, rule: FailureRule,
                   control: np.ndarray, cancel: Optional[threading.Event] = None) -> tuple[torch.Tensor, list[dict]]:
    """The mean over ``reference`` of what the intervention replaces, from an unpatched run that must reproduce
    the epoch (the reference passed in it: at most ``MAX_NOT_REPRODUCED`` of them may fail now); and the loaded
    batches that hold datapoints of ``control``, up to ``KEEP_BYTES``, so that the patched run loads them no more."""
    total = _Mean()
    still_failing = 0
    kept: list[dict] = []
    hook = require_layer(model.model, intervention.module).register_forward_hook(
        lambda module, args, output: total.add(_tensor_output(output, intervention.module))) \
        if isinstance(intervention, UnitPatch) else None
    try:
        for batch in model.batches(reference, cancel):
            if isinstance(intervention, InputMask):
                total.add(_input(batch, intervention.input_key))
            keep = np.isin(idx_list(batch["meta_info"]["idx"]), control).any() \
                and sum(map(_tensor_bytes, kept + [batch])) <= KEEP_BYTES
            kept += [batch] if keep else []
            run = apply_tensor_op(torch.clone, batch) if keep else batch  # a model may change its inputs in place
            still_failing += int(_outcomes(model, run, rule)[1].sum())
    finally:
        if hook is not None:
            hook.remove()
    if still_failing > max(1, MAX_NOT_REPRODUCED * len(reference)):
        raise VerifyError(f"the model rebuilt from {model.config_path} and {model.checkpoint} does not reproduce the "
                          f"epoch: {still_failing} of {len(reference)} datapoints that passed in it fail now. Was the "
                          "dataset's code or the model's changed since the run? Verify with the code it ran with")
    return total.mean(getattr(intervention, "module", None) or f"input '{intervention.input_key}'"), kept


def patched_outcomes(model: EpochModel, intervention: Intervention, mean: torch.Tensor,
                     batches: Iterable[dict[str, Any]], rule: FailureRule) -> list[tuple[int, bool]]:
    """``(idx, failed)`` of every datapoint of ``batches`` with the intervention applied. A patch whose hook did not
    run for every batch (code ``torch.compile`` made calls no hook) is an error, not an intervention without effect."""
    patch = _Patch(intervention, mean) if isinstance(intervention, UnitPatch) else None
    hook = require_layer(model.model, intervention.module).register_forward_hook(patch) if patch else None
    outcomes = []
    try:
        for batch in batches:
            calls = patch.calls if patch else 0
            if isinstance(intervention, InputMask):
                batch = _masked(batch, intervention, mean)
            rows, failed = _outcomes(model, batch, rule)
            if patch is not None and patch.calls == calls:
                raise VerifyError(f"{intervention.module} did not run in the patched forward pass of "
                                  f"{type(model.model).__name__}{compiled_hint(model.model)}")
            outcomes += zip(rows, failed.tolist())
    finally:
        if hook is not None:
            hook.remove()
    return outcomes


def channel_dim(tensor: torch.Tensor) -> int:
    """The dim that holds a layer's units: 1 for (B, C) and (B, C, H, W, ...), the last for tokens (B, T, D)."""
    return tensor.ndim - 1 if tensor.ndim == 3 else 1


class _Patch:
    """The forward hook that returns the module's output with the patched units set to ``mean``; counts its calls."""

    def __init__(self, patch: UnitPatch, mean: torch.Tensor) -> None:
        self.patch, self.mean, self.calls = patch, mean, 0

    def __call__(self, module: torch.nn.Module, args: Any, output: Any) -> torch.Tensor:
        self.calls += 1
        tensor = _tensor_output(output, self.patch.module)
        if tuple(tensor.shape[1:]) != tuple(self.mean.shape):
            raise VerifyError(f"{self.patch.module} gives {tuple(tensor.shape[1:])} per datapoint here but "
                              f"{tuple(self.mean.shape)} on the reference: only a layer whose output has one shape "
                              "for every datapoint can be patched to a mean")
        replace = _unit_mask(self.patch, tensor)
        if self.patch.nonfinite_only:
            replace = replace & ~torch.isfinite(tensor)
        return torch.where(replace, self.mean.to(tensor.dtype), tensor)


def _unit_mask(patch: UnitPatch, tensor: torch.Tensor) -> torch.Tensor:
    if patch.channels is None:
        return torch.ones((), dtype=torch.bool, device=tensor.device)
    dim = channel_dim(tensor)
    units = tensor.shape[dim]
    outside = [c for c in patch.channels if not 0 <= c < units]
    if outside:
        raise VerifyError(f"{patch.module} has no unit {outside[0]}: its output {tuple(tensor.shape)} holds {units} "
                          f"units along dim {dim}")
    mask = torch.zeros(units, dtype=torch.bool, device=tensor.device)
    mask[list(patch.channels)] = True
    shape = [1] * tensor.ndim
    shape[dim] = units
    return mask.view(shape)


def _masked(batch: dict[str, Any], mask: InputMask, mean: torch.Tensor) -> dict[str, Any]:
    image = _input(batch, mask.input_key)
    height, width = image.shape[-2:]
    if mask.region.shape[0] > height or mask.region.shape[1] > width:
        raise VerifyError(f"the region {mask.region.shape} is larger than input '{mask.input_key}' "
                          f"({height}, {width})")
    region = np.zeros((height, width), dtype=bool)
    region[:mask.region.shape[0], :mask.region.shape[1]] = mask.region
    masked = torch.where(torch.from_numpy(region).to(image.device), mean.to(image.dtype), image)
    return {**batch, "inputs": {**batch["inputs"], mask.input_key: masked}}


def _input(batch: dict[str, Any], key: str) -> torch.Tensor:
    inputs = batch.get("inputs")
    image = inputs.get(key) if isinstance(inputs, dict) else None
    if not isinstance(image, torch.Tensor) or image.ndim < 3:
        found = sorted(map(str, inputs)) if isinstance(inputs, dict) else describe_value(inputs)
        raise VerifyError(f"the region is of input '{key}', but the datapoints' inputs hold no batched image under "
                          f"that name (inputs: {found})")
    return image


def _tensor_bytes(value: Any) -> int:
    sizes: list[int] = []
    apply_tensor_op(lambda tensor: sizes.append(tensor.numel() * tensor.element_size()), value)
    return sum(sizes)


def _tensor_output(output: Any, module: str) -> torch.Tensor:
    if not isinstance(output, torch.Tensor) or output.ndim < 2:
        raise VerifyError(f"{module} returns {describe_value(output)}: only a layer that returns one batched tensor "
                          "can be patched; name the layer inside it that computes the units")
    return output


class _Mean:
    """The element-wise mean of batched tensors over their rows that hold no NaN or Inf."""

    def __init__(self) -> None:
        self.total: Optional[torch.Tensor] = None
        self.rows = 0

    def add(self, batch: torch.Tensor) -> None:
        batch = batch.detach()
        finite = torch.isfinite(batch.flatten(1)).all(dim=1)
        if self.total is None:
            self.total = torch.zeros(batch.shape[1:], dtype=torch.float64, device=batch.device)
        if batch.shape[1:] != self.total.shape:
            raise VerifyError(f"the patched part has the shape {tuple(batch.shape[1:])} in one batch and "
                              f"{tuple(self.total.shape)} in another: it cannot be replaced by a mean")
        self.total += batch[finite].double().sum(dim=0)
        self.rows += int(finite.sum())

    def mean(self, what: str) -> torch.Tensor:
        if self.total is None or not self.rows:
            raise VerifyError(f"{what} has no finite value on any passing datapoint of the reference (did it run?)")
        return (self.total / self.rows).float()


def _outcomes(model: EpochModel, batch: dict[str, Any], rule: FailureRule) -> tuple[list[int], np.ndarray]:
    """The batch's idx and whether each fails, by ``rule``."""
    with torch.no_grad():
        outputs = model.model(batch["inputs"])
    if not isinstance(outputs, dict):
        raise ModelContractError(f"{type(model.model).__name__}.forward returned {describe_value(outputs)}, not the "
                                 "dict of named outputs the run's metric reads")
    idx = idx_list(batch["meta_info"]["idx"])
    if rule.metric is None:
        metric = model.metric
        logits = model_output(outputs, metric.output_key, metric, "metric").detach().float()
        target = label(batch["labels"], metric.label_key, metric, "metric")
        predicted, finite = predicted_classes(logits)
        prediction = np.where(finite.cpu().numpy(), predicted.cpu().numpy(), math.nan)
        return idx, rule.failed({}, target.cpu().numpy(), prediction)
    scores = {name: np.asarray(value.detach().cpu() if isinstance(value, torch.Tensor) else value, dtype=np.float64)
              for name, value in model.metric(outputs, batch["labels"]).items()}
    return idx, rule.failed(scores, None, None)


def _debuggers(config: dict[str, Any]) -> list[tuple[str, Any]]:
    """The run's debuggers, built from its config (name, debugger); one that cannot be built is left out."""
    debugger = config.get("debugger")
    entries = debugger.get("args", {}).get("debuggers_config", []) if isinstance(debugger, dict) else []
    built = []
    for entry in entries if isinstance(entries, list) else []:
        try:
            built.append((str(entry["name"]), build_from_config(entry["debugger_config"], f"debugger {entry['name']}")))
        except Exception:  # a debugger that no longer builds names no layer; the other findings are still verified
            continue
    return built


def _chosen(entries: list[tuple[str, dict]], keys: Optional[list[str]]) -> list[tuple[str, dict]]:
    if keys is None:
        return [(key, finding) for key, finding in entries if key.rsplit("-", 1)[0] not in NOT_VERIFIABLE]
    known = dict(entries)
    unknown = [key for key in keys if key not in known]
    if unknown:
        raise VerifyError(f"no finding {unknown[0]!r} in this epoch; its findings: "
                          f"{', '.join(list(known)[:30]) or 'none'}")
    return [(key, known[key]) for key in keys]


def _say(progress: Optional[Progress], message: str) -> None:
    if progress is not None:
        progress(message)

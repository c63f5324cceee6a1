"""Verify findings on the epoch's own model and data: ``python -m runners.analyze --run RUN --verify``.

For each finding, ``analysis.finding_plans`` picks the check (``analysis/intervention.py`` says how an intervention
is judged, ``analysis/replication.py`` how a replication is):

An intervention (units of a layer, a NaN module, a part of the input, a segmentation's prompt):

1. draw the matched control (the finding's failing and passing shares, from outside the finding: as many
   datapoints, less the reference's where the finding holds twice as many, ``control_size``) and the passing
   reference (the control's passing datapoints first), with a fixed seed;
2. run the reference through the rebuilt model unpatched: the mean of what the patch replaces (a forward hook sums
   it, ``runners/interventions.py``) or of the masked input, and a check that the model reproduces the epoch (the
   reference passed in the epoch and must still pass);
3. run the finding and the control in one pass with the patch (a forward hook that returns the patched output,
   or the edited inputs), and judge each datapoint by the epoch's own failure definition;
4. compare the finding's change in failure rate with the control's. An intervention the finding does not name (a
   Grad-CAM region, a moved prompt) that does not confirm it hands the verdict to the replication, where the
   finding has one.

A replication: the finding looked for by the analysis of one half of the datapoints, and what that half found
tested on the other half (no model runs).

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

from analysis.epoch_table import EpochTable
from analysis.failures import FailureDefinition
from analysis.finding_plans import (
    NOT_VERIFIABLE,
    Plan,
    RunFacts,
    cam_region,
    finding_entries,
    finding_name,
    not_offered,
    plan_for_finding,
)
from analysis.internals import CapturedInternals, read_internals
from analysis.intervention import (
    CONFIRMED,
    MEAN,
    PADDING,
    Comparison,
    FailureRule,
    InputMask,
    Intervention,
    InterventionPlan,
    NotVerifiable,
    OfPlan,
    OutcomeCounts,
    PromptMove,
    UnitPatch,
    UnitShift,
    compare,
    control_size,
    failure_rule,
    matched_control,
    passing_reference,
)
from analysis.replication import HeldOut, Replication, ReplicationPlan
from analysis.run_columns import run_columns
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.pages.errors import DebugDataError
from debuggers.pages.reader import load_debug_outputs
from debuggers.utils import compiled_hint
from metrics.classification_metric import predicted_classes
from run_dir.names import EPOCH_TABLE_FILE
from runners.interventions import Mean, Patch, Shift, VerifyError, edited, input_tensor, patch_site, reduced
from runners.run_model import EpochModel
from utils.builders import build_from_config
from utils.errors import ModelContractError
from utils.keyed import label, model_output
from utils.ops import apply_tensor_op, describe_value, idx_list

MAX_NOT_REPRODUCED = 0.1  # share of the reference (passing in the epoch) allowed to fail in the rebuilt model
KEEP_BYTES = 128 * 2**20  # loaded reference batches kept for the patched run (they hold control datapoints)

Progress = Callable[[str], None]
POINT_KEYS = ("point", "points", "point_coords")  # the inputs a promptable segmentation's point prompt goes by


@dataclass
class Verification(OfPlan):
    """One finding's intervention and what it did, against the matched control."""

    plan: InterventionPlan
    control_idx: list[int]  # the matched random set
    reference_idx: list[int]  # the passing datapoints the mean was taken over
    comparison: Comparison
    seconds: float
    replication: Optional[Replication] = None  # beside a verdict that does not confirm what the finding names

    @property
    def intervention(self) -> str:
        return self.plan.intervention.describe()

    @property
    def verdict(self) -> str:
        return self.comparison.verdict

    def to_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {"key": self.key, "finding": self.finding, "intervention": self.intervention, "why": self.plan.why,
                "verdict": c.verdict, "rests_on": "intervention", "reason": c.reason, "seconds": self.seconds,
                "idx": self.plan.idx,
                "control_idx": self.control_idx, "reference_idx": self.reference_idx,
                "finding_counts": vars(c.finding), "control_counts": vars(c.control),
                "change": c.finding.change, "change_interval": [c.finding_interval.low, c.finding_interval.high],
                "control_change": c.control_change,
                "control_change_interval": [c.control_interval.low, c.control_interval.high],
                "effect": c.effect, "effect_interval": [c.effect_interval.low, c.effect_interval.high],
                "replication": None if self.replication is None else self.replication.to_dict()}


Result = Union[Verification, Replication, NotVerifiable]


def verify_findings(epoch_dir: str, findings: dict[str, Any], keys: Optional[list[str]] = None,
                    trust_configs: bool = False, failure: Optional[FailureDefinition] = None, seed: int = 0,
                    cancel: Optional[threading.Event] = None, progress: Optional[Progress] = None) -> list[Result]:
    """Verify the findings ``keys`` (``slices-0``, ...; None: every finding but label suspects, dead units and
    restatements) of ``findings`` (``Findings.to_dict()`` of ``epoch_dir``), in that order; one that no check can
    test (``not_offered``) is a ``NotVerifiable`` saying why."""
    entries = _chosen(finding_entries(findings), keys)
    table = EpochTable(os.path.join(epoch_dir, EPOCH_TABLE_FILE))
    definition = failure or FailureDefinition()
    rule, failed = failure_rule(table, definition)
    model = EpochModel.rebuild(epoch_dir, trust_configs)
    derived = run_columns(epoch_dir, table.values(["idx"])["idx"].astype(np.int64))[0]
    facts = run_facts(table, failed, model, epoch_dir, derived)
    held_out = HeldOut(table, failed, definition, seed, derived)
    results: list[Result] = []
    for key, finding in entries:
        reason = not_offered(key, table.roles)
        plan = NotVerifiable(key, finding_name(finding), reason) if reason else plan_for_finding(key, finding, facts)
        results.append(check(plan, model, rule, facts, held_out, seed, cancel, progress))
    return results


def check(plan: Plan, model: EpochModel, rule: FailureRule, facts: RunFacts, held_out: HeldOut, seed: int = 0,
          cancel: Optional[threading.Event] = None, progress: Optional[Progress] = None) -> Result:
    """The plan's result: the intervention's (with the replication beside it where it names what it patched and
    does not confirm it), the replication's, or (an intervention the finding does not name, which does not confirm
    it) the replication's with the intervention tried."""
    if isinstance(plan, NotVerifiable):
        return plan
    if isinstance(plan, ReplicationPlan):
        return _replicated(plan, held_out, progress)
    result = verify_plan(model, plan, rule, facts, seed, cancel, progress)
    if plan.replication is None or not isinstance(result, Verification) or result.verdict == CONFIRMED:
        return result
    replication = _replicated(plan.replication, held_out, progress)
    if plan.named:
        result.replication = replication
        return result
    replication.tried = result.to_dict()
    return replication


def _replicated(plan: ReplicationPlan, held_out: HeldOut, progress: Optional[Progress]) -> Replication:
    _say(progress, f"{plan.key}: found on one half of the datapoints, tested on the other")
    start = time.perf_counter()
    replication = held_out.replicate(plan)
    replication.seconds = time.perf_counter() - start
    return replication


def run_facts(table: EpochTable, failed: np.ndarray, model: EpochModel, epoch_dir: str,
              derived: Optional[dict[str, np.ndarray]] = None) -> RunFacts:
    """What the adapter needs of the run: the table's idx and failures, summaries, the debuggers' layers, the
    captured Grad-CAM and feature spaces, and whether the datapoints carry a point prompt. A column is the table's or
    one the run folder adds (``derived``, by ``run_columns`` when not given: its tags, its inputs' columns)."""
    table_idx = table.values(["idx"])["idx"].astype(np.int64)
    derived = run_columns(epoch_dir, table_idx)[0] if derived is None else derived
    layers, cams, spaces = {}, [], set()
    for name, debugger in _debuggers(model.config):
        hooked = debugger.layer_names()
        if len(hooked) == 1:
            layers[name] = hooked[0]
        if isinstance(debugger, GradCAMDebugger):
            cams.append((name, debugger.input_key))
        if isinstance(debugger, LayerOutputDebugger):  # its space's units are its layer's
            spaces.add(name)
    first = model.dataset[int(table_idx[0])] if len(table_idx) else {}
    region = None
    if cams:
        try:
            outputs = load_debug_outputs(epoch_dir)
        except DebugDataError:  # unreadable pages: findings name no region then
            outputs = None
        region = (partial(cam_region, outputs, *cams[0], fill=_fill(first, cams[0][1])) if outputs is not None
                  else None)  # None: no pages
    return RunFacts(table_idx, failed, frozenset(table.roles.get("summaries", [])), layers,
                    lambda column: derived[column] if column in derived else table.values([column])[column], region,
                    _captured_spaces(epoch_dir, spaces),
                    _prompt(first, model.metric))


def _fill(datapoint: dict[str, Any], key: str) -> str:
    """How an input is masked: token ids by padding, anything else by the mean."""
    inputs = datapoint.get("inputs") if isinstance(datapoint, dict) else None
    value = inputs.get(key) if isinstance(inputs, dict) else None
    return PADDING if isinstance(value, torch.Tensor) and not value.is_floating_point() else MEAN


def _prompt(datapoint: dict[str, Any], metric: Any) -> Optional[PromptMove]:
    """A point prompt to move, where a datapoint's inputs hold one ((2,) or (N, 2) floats) and its labels the
    target mask the metric reads (its ``label_key``, at least 2-D)."""
    inputs, labels = (datapoint.get(part) if isinstance(datapoint, dict) else None for part in ("inputs", "labels"))
    point = next((key for key in POINT_KEYS if isinstance(inputs, dict) and isinstance(inputs.get(key), torch.Tensor)
                  and inputs[key].is_floating_point() and inputs[key].shape[-1:] == (2,)), None)
    mask_key = getattr(metric, "label_key", None)
    mask = labels.get(mask_key) if isinstance(labels, dict) and isinstance(mask_key, str) else None
    return PromptMove(point, mask_key) if point and isinstance(mask, torch.Tensor) and mask.ndim >= 2 else None


def _captured_spaces(epoch_dir: str, spaces: set[str]) -> Callable[[str], Optional[tuple[np.ndarray, np.ndarray]]]:
    """The feature space a layer-output debugger of ``spaces`` captured (``analysis.internals``), the epoch's pages
    read once, when first asked."""
    read: list[CapturedInternals] = []

    def vectors(debugger: str) -> Optional[tuple[np.ndarray, np.ndarray]]:
        if debugger not in spaces:
            return None
        if not read:
            read.append(read_internals(epoch_dir))
        return read[0].vectors.get(debugger)
    return vectors


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
                   control: np.ndarray, cancel: Optional[threading.Event] = None
                   ) -> tuple[Optional[torch.Tensor], list[dict]]:
    """The mean over ``reference`` of what the intervention replaces (None where it needs none: padding, a moved
    prompt), from an unpatched run that must reproduce the epoch (the reference passed in it: at most
    ``MAX_NOT_REPRODUCED`` of them may fail now); and the loaded batches that hold datapoints of ``control``, up to
    ``KEEP_BYTES``, so that the patched run loads them no more."""
    total = Mean(_replaced(intervention))
    still_failing = 0
    kept: list[dict] = []
    inputs: list[Any] = [None]  # the batch under way, for the layout and the attention mask
    site = patch_site(model.model, intervention) if isinstance(intervention, UnitPatch) else None
    hook = site.watch(lambda tensor: total.add(reduced(site, tensor, inputs[0]))) if site is not None else None
    try:
        for batch in model.batches(reference, cancel):
            if isinstance(intervention, InputMask) and intervention.fill == MEAN:
                total.add(input_tensor(batch, intervention.input_key))
            keep = np.isin(idx_list(batch["meta_info"]["idx"]), control).any() \
                and sum(map(_tensor_bytes, kept + [batch])) <= KEEP_BYTES
            kept += [batch] if keep else []
            run = apply_tensor_op(torch.clone, batch) if keep else batch  # a model may change its inputs in place
            inputs[0] = run["inputs"]
            still_failing += int(_outcomes(model, run, rule)[1].sum())
    finally:
        if hook is not None:
            hook.remove()
    if still_failing > max(1, MAX_NOT_REPRODUCED * len(reference)):
        raise VerifyError(f"the model rebuilt from {model.config_path} and {model.checkpoint} does not reproduce the "
                          f"epoch: {still_failing} of {len(reference)} datapoints that passed in it fail now. Was the "
                          "dataset's code or the model's changed since the run? Verify with the code it ran with")
    needs_mean = site is not None or isinstance(intervention, InputMask) and intervention.fill == MEAN
    return total.mean() if needs_mean else None, kept


def patched_outcomes(model: EpochModel, intervention: Intervention, mean: Optional[torch.Tensor],
                     batches: Iterable[dict[str, Any]], rule: FailureRule) -> list[tuple[int, bool]]:
    """``(idx, failed)`` of every datapoint of ``batches`` with the intervention applied. A patch whose hook did not
    run for every batch (code ``torch.compile`` made calls no hook; an attention module that calls its output
    projection's weights directly) is an error, not an intervention without effect."""
    site = patch_site(model.model, intervention) if isinstance(intervention, (UnitPatch, UnitShift)) else None
    patch = None if site is None else Patch(intervention, site, mean) if isinstance(intervention, UnitPatch) \
        else Shift(intervention, site)
    hook = site.watch(patch) if site is not None else None
    outcomes = []
    try:
        for batch in batches:
            calls = patch.calls if patch else 0
            batch = edited(batch, intervention, mean)
            if patch is not None:
                patch.inputs = batch["inputs"]
            rows, failed = _outcomes(model, batch, rule)
            if patch is not None and patch.calls == calls:
                raise VerifyError(f"{site.name} did not run in the patched forward pass of "
                                  f"{type(model.model).__name__}{compiled_hint(model.model)}")
            outcomes += zip(rows, failed.tolist())
    finally:
        if hook is not None:
            hook.remove()
    return outcomes


def _replaced(intervention: Intervention) -> str:
    return getattr(intervention, "module", None) or f"input '{getattr(intervention, 'input_key', '')}'"


def _tensor_bytes(value: Any) -> int:
    sizes: list[int] = []
    apply_tensor_op(lambda tensor: sizes.append(tensor.numel() * tensor.element_size()), value)
    return sum(sizes)


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

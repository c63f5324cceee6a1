"""``GradCAMDebugger``: Grad-CAM heatmaps (Selvaraju et al., 2017), one per datapoint, over an image, a signal, a
volume or a sequence of tokens."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import torch
import torch.nn.functional as F

from debuggers.base_debugger import BaseDebugger, Removable
from debuggers.batch_mode import BATCHED
from debuggers.feature_layout import CHANNELS_FIRST, TOKENS, output_layout, token_mask
from debuggers.model_runs import eval_mode, output_tensor
from debuggers.outputs import KIND_CAM, PerDatapoint
from debuggers.tensor_utils import describe
from debuggers.utils import compiled_hint, require_layer
from utils.errors import ConfigError

Target = Union[str, int]
_NAMED_TARGETS = ("predicted", "label")
_MODES = {1: "linear", 2: "bilinear", 3: "trilinear"}  # F.interpolate's mode by the number of position dims
_AXES = {1: ("x",), 2: ("y", "x"), 3: ("z", "y", "x")}  # a cam's position dims, by their number


class GradCAMDebugger(BaseDebugger):
    """Which positions of the input (pixels, samples of a signal, voxels, tokens) raised each datapoint's target class
    score, seen from ``target_layer``.

    While attached (inside ``SequentialDebugger``), the evaluation loop's own forward pass
    (in eval mode) records a graph from ``target_layer`` up to the logits, even inside
    ``torch.no_grad()``; the loop still gets outputs without a graph, and grad mode is put
    back when the forward pass ends. Called on its own, or when the model was in training
    mode or ran on other inputs, the debugger reruns the forward on ``datapoint['inputs']``
    in eval mode instead, with no graph below ``target_layer``. For activations A with units c
    over positions p (``debuggers/feature_layout.py``: a conv layer's (B, C, t), (B, C, h, w) or
    (B, C, d, h, w); a transformer block's tokens (B, T, D)) and the target logits y (one per
    datapoint):

        w_c = mean over p of dy/dA_c,   cam = ReLU(sum_c w_c A_c)

    upsampled (linearly, bilinearly, trilinearly) to the size of input ``input_key`` (its dims after
    the channels: (B, C_in, T) signals, (B, C_in, H, W) images, (B, C_in, D, H, W) volumes; token ids
    (B, T) are of the cam's own size) and divided by its maximum per datapoint (an all-zero cam stays
    zero). Tokens: the mean runs over the real tokens where the inputs hold an ``attention_mask``,
    and padding gets no cam. Gradients are taken with ``torch.autograd.grad`` w.r.t. A only: no
    parameter's ``.grad`` is touched.

    Args:
        target_layer: a layer whose output has positions, e.g. ``backbone.layer4`` (a Conv2d stage),
            ``backbone.stage3`` (a Conv1d stage), ``blocks.1`` (a transformer block).
        target: ``'predicted'`` (argmax of the logits), ``'label'`` (``labels[label_key]``)
            or a class index.
        output_key: key of the (B, K) logits in the model's output dict (None: the output itself).
        input_key: key of the input in ``inputs`` (an image, a signal, token ids); its positions are the cam's size.
        label_key: key of the class labels, for ``target='label'``.

    Output ``{'kind': 'cam', 'cam': (B, *positions) e.g. (B, H, W), 'target_class': (B,), 'target_score': (B,),
    'target_layer', 'layer_size' (the layer's positions the cam was upsampled from, e.g. [h, w]), 'raw_max': (B,),
    'spatial': {'centroid_x', 'centroid_y', 'centre_fraction', 'spread', 'entropy': (B,)}, 'predicted_class': (B,),
    'label_class': (B,), 'other_target': PerDatapoint}`` where
    ``raw_max`` is what the upsampled cam was divided by, its maximum (how strong the evidence is: ``cam *
    raw_max`` is the cam before normalisation; a peak between the (h, w) map's pixels is a little lower after
    the upsampling than in the map) and
    ``spatial`` where the cam's mass lies (``cam_spatial_stats``). ``label_class`` is there when the batch
    has class labels. With a ``'predicted'`` or ``'label'`` target and labels, ``other_target`` holds, for
    each datapoint whose label and prediction differ, the cam of the other one (``{'cam': (H, W),
    'target_class', 'target_score', 'raw_max'}``), and None for the others: a wrong prediction is seen
    beside the evidence for the true class.

    Cost: the rerun records no graph below ``target_layer`` (it runs under ``no_grad`` up to it),
    one ``autograd.grad`` serves the whole batch, a second one (from the graph above ``target_layer``
    only) the datapoints whose label and prediction differ, and the cams are built without
    per-datapoint temporaries.
    """

    runs_model = True
    batch_mode = BATCHED  # outputs with the batch first (debuggers/batch_mode.py)
    LOGITS_NDIM = 2  # (B, K) logits; a segmentation model's are (B, K, h, w)

    def __init__(self, target_layer: str, target: Target = "predicted", output_key: Optional[str] = "logits",
                 input_key: str = "image", label_key: str = "class") -> None:
        if not (target in _NAMED_TARGETS or (isinstance(target, int) and not isinstance(target, bool)
                                             and target >= 0)):
            raise ConfigError(f"GradCAMDebugger target must be 'predicted', 'label' or a class index >= 0, "
                              f"got {target!r}")
        self.target_layer = target_layer
        self.target = target
        self.output_key = output_key
        self.input_key = input_key
        self.label_key = label_key
        self._armed: Optional[_EvalPass] = None
        self._eval_pass: Optional[_EvalPass] = None
        self._layout = CHANNELS_FIRST  # of the target layer's output, set when it runs

    def layer_names(self) -> list[str]:
        return [self.target_layer]

    def attach(self, model: torch.nn.Module) -> list[Removable]:
        """Let the evaluator's own forward pass build the graph above ``target_layer`` (its caller gets
        detached outputs, as under ``no_grad``): Grad-CAM then needs no second forward pass."""
        layer = require_layer(model, self.target_layer)
        return [model.register_forward_pre_hook(self._arm), layer.register_forward_hook(self._keep_eval_pass),
                model.register_forward_hook(self._disarm)]

    def _arm(self, model: torch.nn.Module, args: tuple) -> None:
        self._eval_pass = None
        reusable = not model.training and not torch.is_inference_mode_enabled()  # no graph in inference mode
        self._armed = _EvalPass(args[0] if args else None, torch.is_grad_enabled()) if reusable else None

    def _keep_eval_pass(self, module: torch.nn.Module, args: tuple, output: Any) -> Any:
        if self._armed is None:
            return None
        self._note_layout(module, output, self._armed.inputs)
        return start_graph(output, self._armed.kept)

    def _note_layout(self, module: torch.nn.Module, output: Any, inputs: Any) -> None:
        if isinstance(output, torch.Tensor):
            self._layout = output_layout(module, output, inputs)

    def _disarm(self, model: torch.nn.Module, args: tuple, output: Any) -> Any:
        armed, self._armed = self._armed, None
        if armed is None:
            return None
        torch.set_grad_enabled(armed.grad_mode)
        armed.logits = output.get(self.output_key) if isinstance(output, dict) else output
        self._eval_pass = armed
        return _detached(output)

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> dict[str, Any]:
        activations, logits = self._activations_and_logits(datapoint, model)
        targets = self._targets(datapoint, logits)
        predicted = logits.detach().argmax(dim=1)
        labels = self._labels(datapoint, logits, required=False)
        other = _other_target(self.target, labels, predicted)
        differ = (other != targets).nonzero().squeeze(1) if other is not None else targets[:0]
        with torch.enable_grad():  # one backward for the batch: datapoints are independent in eval mode
            scores = logits.gather(1, targets[:, None]).squeeze(1)
            # the graph is kept for the other target and for other Grad-CAM debuggers sharing this forward
            # pass; it is freed with the logits when the call returns
            (gradients,) = torch.autograd.grad(scores.sum(), activations, retain_graph=True)
        with torch.no_grad():
            cam, raw_max = self._cam(gradients, activations, datapoint)
        output = {
            "kind": KIND_CAM,
            "cam": cam,
            "target_class": targets,
            "target_score": scores.detach(),
            "target_layer": self.target_layer,
            "raw_max": raw_max,
            "layer_size": list(activations.shape[1:2] if self._layout == TOKENS else activations.shape[2:]),
            "spatial": cam_spatial_stats(cam),
            "predicted_class": predicted,
        }
        if labels is not None:
            output["label_class"] = labels
        if other is not None:
            output["other_target"] = self._other_cams(logits, activations, other, differ, datapoint)
        return output

    def _cam(self, gradients: torch.Tensor, activations: torch.Tensor,
             datapoint: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """The normalised, upsampled cams (B, *positions) and what each was divided by, its maximum (B,): one number,
        so that ``cam * raw_max`` is the upsampled cam before normalisation."""
        mask = token_mask(datapoint.get("inputs"), activations) if self._layout == TOKENS else None
        cam = self._upsample(position_cam(gradients, activations, self._layout, mask), datapoint)
        raw_max = cam.flatten(1).amax(dim=1)
        cam.div_(raw_max.view(-1, *[1] * (cam.ndim - 1)).clamp(min=torch.finfo(cam.dtype).tiny))
        return cam, raw_max

    def _other_cams(self, logits: torch.Tensor, activations: torch.Tensor, other: torch.Tensor,
                    differ: torch.Tensor, datapoint: dict[str, Any]) -> PerDatapoint:
        """The other target's cam record for each datapoint in ``differ``, None for the rest.

        A second backward from the other target's logits of only those datapoints, through the graph
        above ``target_layer`` kept by the first; a batch where label and prediction agree everywhere
        costs nothing.
        """
        records: list[Optional[dict[str, Any]]] = [None] * len(other)
        if not len(differ):
            return PerDatapoint(records)
        with torch.enable_grad():
            scores = logits[differ, other[differ]]
            (gradients,) = torch.autograd.grad(scores.sum(), activations, retain_graph=True)
        with torch.no_grad():
            cam, raw_max = self._cam(gradients[differ], activations[differ], datapoint)
        for row, (i, score, peak) in enumerate(zip(differ.tolist(), scores.detach().tolist(), raw_max.tolist())):
            records[i] = {"cam": cam[row], "target_class": int(other[i]), "target_score": score, "raw_max": peak}
        return PerDatapoint(records)

    summary_roles = {"target_score": "outcome", "target_class": "outcome", "raw_max": "outcome",
                     **{key: "input_region" for key in ("centroid_x", "centroid_y", "centroid_z", "centre_fraction",
                                                        "spread", "entropy")}}

    def summary_columns(self, output: dict[str, Any]) -> dict[str, Any]:
        """The target's score and class, the cam's raw maximum, and where its mass lies (``spatial``)."""
        return {**{key: output[key] for key in ("target_score", "raw_max", "target_class")}, **output["spatial"]}

    def _activations_and_logits(self, datapoint: dict[str, Any],
                                model: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        """The target layer's activations A and the logits, with the graph between them: the evaluation loop's own
        forward pass where it ran on these inputs, else a forward pass of its own."""
        eval_pass, self._eval_pass = self._eval_pass, None
        if eval_pass is not None and eval_pass.serves(datapoint, self.LOGITS_NDIM):
            return eval_pass.kept[-1], eval_pass.logits
        if torch.is_inference_mode_enabled():
            raise RuntimeError(f"{type(self).__name__} needs gradients, which torch.inference_mode() forbids: run "
                               "the evaluation loop under torch.no_grad() instead")
        return self._forward(datapoint, model)  # called on its own, or the model ran differently: run it again

    def _logits(self, outputs: Any) -> torch.Tensor:
        """The logits Grad-CAM explains, from the model's outputs (a clear error when they are not there)."""
        return output_tensor(outputs, self.output_key, type(self).__name__)

    def _forward(self, datapoint: dict[str, Any], model: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        """Rerun the model (grad enabled by the caller); return the target layer's activations and the logits."""
        layer = require_layer(model, self.target_layer)
        kept: list[Any] = []

        def keep(module: torch.nn.Module, args: tuple, output: Any) -> Any:
            self._note_layout(module, output, datapoint.get("inputs"))
            return start_graph(output, kept)
        handle = layer.register_forward_hook(keep)
        try:
            with eval_mode(model), torch.no_grad():  # grad mode is back as it was after the block
                logits = self._logits(model(datapoint["inputs"]))
        finally:
            handle.remove()
        if not kept:
            raise RuntimeError(f"layer '{self.target_layer}' did not run in the model's forward pass; "
                               f"pick a layer on the path from the input to the logits{compiled_hint(model)}")
        activations = kept[-1]
        if not isinstance(activations, torch.Tensor) or not 3 <= activations.ndim <= 5:
            raise TypeError(f"GradCAMDebugger needs an output with positions from layer '{self.target_layer}' (a conv "
                            f"layer's (B, C, t), (B, C, h, w) or (B, C, d, h, w), or tokens (B, T, D)), which "
                            f"returned {describe(activations)}; pick a layer before the model pools its positions "
                            "away")
        if not logits.requires_grad:
            raise RuntimeError(f"the logits do not depend on layer '{self.target_layer}' through differentiable "
                               "operations; pick a layer on the path from the input to the logits")
        return activations, logits

    def _targets(self, datapoint: dict[str, Any], logits: torch.Tensor) -> torch.Tensor:
        batch, num_classes = logits.shape
        if self.target == "predicted":
            return logits.detach().argmax(dim=1)
        if self.target == "label":
            return self._labels(datapoint, logits, required=True)
        if self.target >= num_classes:
            raise ValueError(f"GradCAMDebugger target class {self.target} does not exist: the model has "
                             f"{num_classes} classes (0..{num_classes - 1})")
        return torch.full((batch,), self.target, dtype=torch.long, device=logits.device)

    def _labels(self, datapoint: dict[str, Any], logits: torch.Tensor, required: bool) -> Optional[torch.Tensor]:
        """The (B,) class labels ``labels[label_key]``; None where there are none, unless ``required``."""
        batch, num_classes = logits.shape
        labels = datapoint.get("labels")
        labels = labels.get(self.label_key) if isinstance(labels, dict) else None
        if isinstance(labels, torch.Tensor) and labels.numel() == batch:
            labels = labels.reshape(batch).to(device=logits.device, dtype=torch.long)
            if required or bool(((labels >= 0) & (labels < num_classes)).all()):
                return labels
        if required:
            raise ValueError(f"GradCAMDebugger target='label' needs datapoint['labels']['{self.label_key}'] "
                             "as a (B,) tensor of class indices; use target='predicted' otherwise")
        return None

    def _upsample(self, cam: torch.Tensor, datapoint: dict[str, Any]) -> torch.Tensor:
        """The cam at the size of the input's positions (its dims after the channels), where it has as many."""
        image = datapoint["inputs"].get(self.input_key) if isinstance(datapoint["inputs"], dict) else None
        positions = cam.ndim - 1
        if not isinstance(image, torch.Tensor) or image.ndim != positions + 2 or image.shape[2:] == cam.shape[1:]:
            return cam
        return F.interpolate(cam[:, None], size=image.shape[2:], mode=_MODES[positions], align_corners=False)[:, 0]


def position_cam(gradients: torch.Tensor, activations: torch.Tensor, layout: str,
                 mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """ReLU(sum_c w_c A_c), w_c the mean over positions of dy/dA_c: (B, *positions). Tokens (B, T, D) have their
    units last; ``mask`` (B, T), True on real tokens, keeps padding out of the mean and of the cam."""
    if layout == TOKENS:
        gradients, activations = gradients.transpose(1, 2), activations.transpose(1, 2)
    if mask is None:
        weights = gradients.flatten(2).mean(dim=2)
    else:
        real = mask.to(gradients.dtype)
        weights = (gradients * real[:, None]).sum(dim=2) / real.sum(dim=1, keepdim=True).clamp(min=1)
    cam = torch.einsum("bc,bc...->b...", weights, activations).relu_()
    return cam if mask is None else cam * mask


def _other_target(target: Target, labels: Optional[torch.Tensor],
                  predicted: torch.Tensor) -> Optional[torch.Tensor]:
    """The label for a 'predicted' target, the prediction for a 'label' target; None for a fixed class."""
    if labels is None or target not in _NAMED_TARGETS:
        return None
    return labels if target == "predicted" else predicted


def start_graph(output: Any, kept: list[Any]) -> Any:
    """Forward hook on the target layer: keep its output A (with positions: 3 to 5 dims) as a leaf and record a graph
    from here.

    The model goes on with a copy, as captum's LayerGradCam does: an in-place op next
    (``ReLU(inplace=True)``, ``out += identity``) then changes the copy, never the kept A; and
    frozen layers below are no obstacle. Layers below ran without a graph: none is needed.
    """
    if not (isinstance(output, torch.Tensor) and 3 <= output.ndim <= 5 and output.is_floating_point()):
        kept.append(output)
        return None
    # Another Grad-CAM debugger's hook on this layer may have started the graph already: its copy is then
    # A for this one too (a second leaf would cut the first debugger's A out of the graph).
    activations = output if output.requires_grad else output.detach().requires_grad_()
    kept.append(activations)
    torch.set_grad_enabled(True)
    return activations.clone()


@dataclass
class _EvalPass:
    """What one forward pass of the model left for Grad-CAM: its inputs, A and the logits with their graph."""

    inputs: Any
    grad_mode: bool  # to put back when the forward pass ends
    kept: list[Any] = field(default_factory=list)
    logits: Any = None

    def serves(self, datapoint: dict[str, Any], logits_ndim: int = 2) -> bool:
        """Whether this pass ran on ``datapoint``'s inputs and left what Grad-CAM needs (logits of ``logits_ndim``
        dimensions)."""
        return (self.inputs is datapoint.get("inputs") and bool(self.kept) and isinstance(self.kept[-1], torch.Tensor)
                and isinstance(self.logits, torch.Tensor) and self.logits.ndim == logits_ndim
                and self.logits.requires_grad)


def _detached(output: Any) -> Any:
    """The model's output without its graph, dicts kept as the same objects (a ModelOutput stays one)."""
    if isinstance(output, torch.Tensor):
        return output.detach()
    if isinstance(output, dict):
        for key, value in output.items():
            output[key] = _detached(value)
        return output
    if isinstance(output, (list, tuple)) and not hasattr(output, "_fields"):
        return type(output)(_detached(value) for value in output)
    return output


def cam_spatial_stats(cam: torch.Tensor) -> dict[str, torch.Tensor]:
    """Where the mass of each cam of a batch lies, as a distribution over its positions: (B, H, W) images, (B, T)
    signals and sequences, (B, D, H, W) volumes.

    Coordinates are position centres in [0, 1] (x across, y down, z in depth; a 1-D cam has x only): the centroid,
    the share of the mass in the central box (the middle half of each side), the spread (root mean squared
    distance from the centroid) and the entropy divided by log(number of positions) (1: uniform, 0: one position).
    All (B,), nan for an all-zero cam.
    """
    sizes = cam.shape[1:]
    cam = cam.double()
    total = cam.flatten(1).sum(dim=1)
    share = torch.where(total > 0, 1 / total, torch.nan)
    centroids, variance = {}, torch.zeros_like(total)
    for dim, (axis, size) in enumerate(zip(_AXES[len(sizes)], sizes), start=1):
        others = [d for d in range(1, cam.ndim) if d != dim]
        marginal = (cam.sum(dim=others) if others else cam) * share[:, None]
        coords = (torch.arange(size, dtype=cam.dtype, device=cam.device) + 0.5) / size
        centroids[axis] = marginal @ coords
        variance = variance + marginal @ coords.square() - centroids[axis].square()
    plogp = torch.special.xlogy(cam, cam).flatten(1).sum(dim=1) * share - torch.log(total)  # sum p log p
    positions = math.prod(sizes)
    centre = cam[(slice(None), *(slice(size // 4, size - size // 4) for size in sizes))]
    return {
        **{f"centroid_{axis}": centroids[axis] for axis in ("x", "y", "z") if axis in centroids},
        "centre_fraction": centre.flatten(1).sum(dim=1) * share,
        "spread": variance.clamp(min=0).sqrt(),
        "entropy": -plogp / math.log(positions) if positions > 1 else torch.zeros_like(total) * share,
    }

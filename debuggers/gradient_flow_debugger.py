"""``GradientFlowDebugger``: how much gradient each layer gets from each datapoint's loss."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad_and_value, vmap

from debuggers.base_debugger import BaseDebugger
from debuggers.batch_mode import BATCHED
from debuggers.model_runs import eval_mode, output_tensor
from debuggers.outputs import KIND_GRADIENT_FLOW, ROOT_MODULE_NAME
from debuggers.tensor_utils import as_tensor, batch_size_of, select_datapoint
from utils.errors import ConfigError

LossFn = Callable[[Any, Any], torch.Tensor]
LayerType = Union[type, str]
MAX_SUMMARY_LAYERS = 12  # layers with a column of their own in the summary
_CHUNK_ELEMENTS = 2**26  # per-datapoint gradient values vmap holds at once (256 MB of float32)


def cross_entropy_per_datapoint(outputs: Any, labels: Any) -> torch.Tensor:
    """The default loss: cross-entropy of ``outputs['logits']`` against ``labels['class']``, one per datapoint."""
    if not isinstance(labels, dict) or not isinstance(labels.get("class"), torch.Tensor):
        raise ValueError("GradientFlowDebugger's default loss needs labels['class'] (class indices); "
                         "pass loss_fn=(outputs, labels) -> per-datapoint losses for other labels")
    logits = output_tensor(outputs, "logits", "GradientFlowDebugger")
    return F.cross_entropy(logits, labels["class"].reshape(-1).to(logits.device), reduction="none")


class GradientFlowDebugger(BaseDebugger):
    """Per-datapoint gradient norm of every parameterised layer, with layers that get none flagged.

    For each datapoint alone (a batch of one, in eval mode, so the result does
    not depend on the batch it came in) the loss is computed and its gradient
    w.r.t. each layer's own parameters taken; a layer's norm is the Euclidean norm
    over all of them. All datapoints are done at once with ``torch.func.vmap``
    (per-sample gradients); a model vmap cannot run (``.item()``, Python branches
    on tensor values, random ops) falls back to one ``torch.autograd.grad`` call per
    datapoint. ``.grad`` of the parameters is never touched. Layers are the modules with parameters of their
    own, optionally only those of ``layer_types`` (classes or class names).

    ``loss_fn(outputs, labels)`` returns the loss of each datapoint of its batch;
    since it is called on batches of one, a mean-reducing criterion works too.

    Flags: ``missing`` - no parameter of the layer is reached from the loss
    (unused in the forward, or detached); ``zero`` - reached but the gradient is
    exactly zero (dead ReLUs, saturation); ``below_rounding`` - reached, and the norm is at most the
    layer's parameter dtype's eps times the datapoint's largest finite layer norm (see ``below_rounding``);
    ``frozen`` - no parameter requires grad.

    Output ``{'kind': 'gradient_flow', 'layers': [names], 'grad_norms': (B, L), 'missing': (B, L),
    'zero': (B, L), 'below_rounding': (B, L), 'frozen': [bool per layer], 'loss': (B,)}``; missing layers
    have norm 0.
    """

    runs_model = True
    batch_mode = BATCHED  # outputs with the batch first (debuggers/batch_mode.py)

    def __init__(self, loss_fn: Optional[LossFn] = None, layer_types: Optional[Sequence[LayerType]] = None) -> None:
        if loss_fn is not None and not callable(loss_fn):
            raise ConfigError(f"GradientFlowDebugger loss_fn must be callable (outputs, labels) -> (B,) losses, "
                              f"got {loss_fn!r}")
        self.loss_fn = loss_fn or cross_entropy_per_datapoint
        self.layer_types = tuple(layer_types) if layer_types is not None else None
        self._vectorise = True

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> dict[str, Any]:
        layers = self._layers(model)
        if not layers:
            raise ValueError(f"GradientFlowDebugger found no layer with parameters of types {self.layer_types} "
                             f"in {type(model).__name__}; check layer_types")
        batch = batch_size_of(datapoint)
        with eval_mode(model), torch.enable_grad():
            norms, missing, losses = self._gradients(model, layers, datapoint, batch)
        return {
            "kind": KIND_GRADIENT_FLOW,
            "layers": [name for name, _ in layers],
            "grad_norms": norms,
            "missing": missing,
            "zero": (norms == 0) & ~missing,
            "below_rounding": below_rounding(norms, _eps(layers)) & ~missing,
            "frozen": [not any(p.requires_grad for p in params) for _, params in layers],
            "loss": losses,
        }

    def summary_columns(self, output: dict[str, Any]) -> dict[str, torch.Tensor]:
        """The loss, the norm over all layers, the largest and smallest norm of a layer the gradient reaches, how
        many layers get no gradient or a zero one, and each layer's norm when there are at most 12 layers."""
        norms = as_tensor(output["grad_norms"]).double()  # (B, L)
        missing = as_tensor(output["missing"]).to(device=norms.device, dtype=torch.bool)
        unreached = missing.all(1)
        summary = {"loss": output["loss"], "total_norm": torch.linalg.vector_norm(norms, dim=1),
                   "max_norm": torch.where(missing, -torch.inf, norms).amax(1).masked_fill(unreached, torch.nan),
                   "min_norm": torch.where(missing, torch.inf, norms).amin(1).masked_fill(unreached, torch.nan),
                   "missing_layers": missing.sum(1), "zero_layers": as_tensor(output["zero"]).sum(1)}
        if norms.shape[1] <= MAX_SUMMARY_LAYERS:
            summary.update({f"norm.{layer}": norms[:, i] for i, layer in enumerate(output["layers"])})
        return summary

    def _gradients(self, model: torch.nn.Module, layers: list, datapoint: dict[str, Any], batch: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Norms (B, L), missing flags (B, L) and losses (B,): vectorised if the model allows it, else a loop."""
        if self._vectorise:
            try:
                return self._vectorised(model, layers, datapoint, batch)
            except RuntimeError:  # vmap cannot run this model (.item(), data-dependent branches, random ops)
                self._vectorise = False
        rows = [self._datapoint_grads(model, layers, select_datapoint(datapoint, i, batch)) for i in range(batch)]
        return tuple(torch.stack(column) for column in zip(*rows))

    def _vectorised(self, model: torch.nn.Module, layers: list, datapoint: dict[str, Any], batch: int
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-datapoint gradients of batches of one, all at once with ``torch.func.vmap``."""
        names = {id(p): name for name, p in model.named_parameters()}
        params = {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}
        groups = [[names[id(p)] for p in layer_params if p.requires_grad] for _, layer_params in layers]
        dims = (_batch_dims(datapoint["inputs"], batch), _batch_dims(datapoint.get("labels"), batch))

        def loss_of_one(params: dict, inputs: Any, labels: Any) -> torch.Tensor:
            outputs = functional_call(model, params, (_with_batch_dim(inputs, dims[0]),))
            return self._one_loss(outputs, _with_batch_dim(labels, dims[1]))

        def norms_of_one(params: dict, inputs: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
            grads, loss = grad_and_value(loss_of_one)(params, inputs, labels)
            return torch.stack([_norm([grads[name] for name in group]) for group in groups]), loss

        chunk = max(1, _CHUNK_ELEMENTS // max(1, sum(p.numel() for p in params.values())))
        norms, losses = vmap(norms_of_one, in_dims=(None, *dims), chunk_size=chunk)(
            params, datapoint["inputs"], datapoint.get("labels"))
        zero = norms == 0  # torch.func gives zeros for unreached parameters: tell them apart only if needed
        missing = zero & ~self._reached(model, layers, datapoint) if bool(zero.any()) else zero
        return norms.float().cpu(), missing.cpu(), losses.detach().float().cpu()

    def _reached(self, model: torch.nn.Module, layers: list, datapoint: dict[str, Any]) -> torch.Tensor:
        """(L,) whether the loss depends on each layer's parameters at all (the graph of one batch pass)."""
        trainable = [p for _, params in layers for p in params if p.requires_grad]
        loss = self.loss_fn(model(datapoint["inputs"]), datapoint.get("labels")).sum()
        grads = torch.autograd.grad(loss, trainable, allow_unused=True) if loss.requires_grad and trainable \
            else [None] * len(trainable)
        found = {id(p) for p, g in zip(trainable, grads) if g is not None}
        return torch.tensor([any(id(p) in found for p in params) for _, params in layers], device=loss.device)

    def _one_loss(self, outputs: Any, labels: Any) -> torch.Tensor:
        loss = self.loss_fn(outputs, labels)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise ValueError(f"GradientFlowDebugger loss_fn must return one loss per datapoint (shape (B,), "
                             f"e.g. reduction='none'), got {getattr(loss, 'shape', loss)!r} for a batch of one")
        return loss.reshape(())

    def _layers(self, model: torch.nn.Module) -> list[tuple[str, list[torch.nn.Parameter]]]:
        return [(name or ROOT_MODULE_NAME, params) for name, module in model.named_modules()
                if (params := list(module.parameters(recurse=False))) and self._selected(module)]

    def _selected(self, module: torch.nn.Module) -> bool:
        if self.layer_types is None:
            return True
        return any(isinstance(module, t) if isinstance(t, type) else type(module).__name__ == t
                   for t in self.layer_types)

    def _datapoint_grads(self, model: torch.nn.Module, layers: list, datapoint: dict[str, Any]
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Layer norms (L,), missing flags (L,) and the loss of a batch of one."""
        trainable = [p for _, params in layers for p in params if p.requires_grad]
        loss = self._one_loss(model(datapoint["inputs"]), datapoint.get("labels"))
        grads = torch.autograd.grad(loss, trainable, allow_unused=True) if loss.requires_grad and trainable \
            else [None] * len(trainable)
        found = {id(p): g for p, g in zip(trainable, grads) if g is not None}
        layer_grads = [[found[id(p)] for p in params if id(p) in found] for _, params in layers]
        norms = torch.stack([_norm(grads) for grads in layer_grads]).float().cpu()
        return norms, torch.tensor([not grads for grads in layer_grads]), loss.detach().float().cpu()


def below_rounding(norms: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """(B, L) whether each layer's norm is at most ``eps`` (L,) (its parameters' dtype's) times the datapoint's
    largest finite layer norm: a gradient that is zero, or so small beside the others that the dtype's rounding
    could have made it. Padding or another attention kernel turns a gradient that is exactly zero alone (a key
    bias under softmax, a query that sees one key) into rounding noise (1e-10 in float32) in a padded batch,
    so ``zero`` may differ between the two where this flag does not; a vanishing gradient (1e-11 of the
    largest) is flagged too, and ``zero`` tells it apart from a dead layer. An inf or NaN norm is never flagged
    and does not move the others' bar."""
    finite = norms.isfinite()
    largest = torch.where(finite, norms, 0.0).amax(dim=1, keepdim=True)
    return finite & (norms <= eps * largest)


def _eps(layers: list[tuple[str, list[torch.nn.Parameter]]]) -> torch.Tensor:
    """(L,) each layer's rounding unit: its floating parameters' coarsest dtype's eps (bfloat16's is 7.8e-3)."""
    return torch.tensor([max((torch.finfo(p.dtype).eps for p in params if p.dtype.is_floating_point),
                             default=torch.finfo(torch.float32).eps) for _, params in layers], dtype=torch.float64)


def _norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """Euclidean norm over several tensors (0 for none), in float64 so tiny gradients do not vanish."""
    if not grads:
        return torch.zeros((), dtype=torch.float64)
    return torch.stack([g.double().pow(2).sum() for g in grads]).sum().sqrt()


def _batch_dims(value: Any, batch: int) -> Any:
    """vmap ``in_dims`` for ``value``: 0 for tensors with the batch first, None for anything else."""
    if isinstance(value, torch.Tensor):
        return 0 if value.ndim >= 1 and value.shape[0] == batch else None
    if isinstance(value, dict):
        return {key: _batch_dims(item, batch) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_batch_dims(item, batch) for item in value)
    return None


def _with_batch_dim(value: Any, dims: Any) -> Any:
    """Inside vmap: give the mapped tensors back a batch dimension of one, as the model expects."""
    if isinstance(value, torch.Tensor):
        return value.unsqueeze(0) if dims == 0 else value
    if isinstance(value, dict):
        return {key: _with_batch_dim(item, dims[key]) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_with_batch_dim(item, d) for item, d in zip(value, dims))
    return value

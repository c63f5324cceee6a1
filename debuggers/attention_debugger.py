"""``AttentionDebugger``: per-head attention weights of one attention layer, per datapoint."""

from __future__ import annotations

import inspect
import math
import os
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError  # not the built-in one before 3.11
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
from torch import nn

from debuggers.base_debugger import Removable
from debuggers.batch_mode import BATCHED
from debuggers.capture import listen
from debuggers.forward_debugger import ForwardDebugger
from debuggers.outputs import KIND_ATTENTION, PerDatapoint
from debuggers.pages.buffer_pool import BufferPool
from debuggers.pages.host_copies import copy_arrays
from debuggers.tensor_utils import as_tensor, batch_size_of, describe
from debuggers.utils import require_layer

_MHA_SIGNATURE = inspect.signature(nn.MultiheadAttention.forward)
MAX_SUMMARY_HEADS = 8  # heads with a column of their own in the summary
_EAGER = "eager"  # the only Hugging Face attention implementation that computes the weights
_CHUNK = 1 << 18  # weights per chunk of the row statistics: a 1 MB scratch
# An additive float key_padding_mask of this or less marks a padding key, as -inf does: -1e4 (the fp16-safe
# convention), -1e9 and finfo.min all leave the key a weight of exp(-1e4) = 0 in every float dtype.
PADDING_BIAS = -1e4
_SUM_TOLERANCE = 1e-3  # at least; wider for the rounding of low-precision weights (see _sum_tolerance)
_CROSS_ARGUMENTS = ("key_value_states", "encoder_hidden_states")  # Hugging Face cross-attention: keys from the encoder
_SELF_MASKS = ("attention_mask", "mask")  # T5Attention's is `mask`
_CROSS_MASKS = ("encoder_attention_mask", *_SELF_MASKS)  # BertAttention's cross-attention reads the first
_DECODER = "decoder_"  # Hugging Face's prefix of a decoder's inputs in an encoder-decoder's batch


@dataclass
class _Capture:
    """One call's weights (B, heads, Lq, Lk) and which tokens are real, where the layer knows it."""

    weights: torch.Tensor
    metadata: Optional[dict]
    query_real: Optional[torch.Tensor] = None  # (B, Lq) bool
    key_real: Optional[torch.Tensor] = None  # (B, Lk) bool
    rows: Optional[RowStatistics] = None  # started on the copy as soon as it is taken
    element: Optional[int] = None  # where in the layer's output tuple the weights were found, to be checked
    cross: bool = False  # a cross-attention: its queries are the decoder's tokens
    seen: Optional[torch.Tensor] = None  # (B, Lk) the keys the layer's own 4-D mask lets a query see (see _keys_seen)


class AttentionDebugger(ForwardDebugger):
    """Attention weights of ``layer_name`` per datapoint, cropped to its real tokens, and how peaked they are.

    Three kinds of layers are understood, and the model's output is the same as without the debugger:

    * ``nn.MultiheadAttention`` (``batch_first`` or not): while attached, each call is made with
      ``need_weights=True, average_attn_weights=False`` and the caller gets back exactly what it
      asked for. Its ``key_padding_mask`` (and the padding of ``nn.TransformerEncoder``'s
      nested-tensor fast path) says which tokens are real.
    * a module that returns a tuple whose last 4-D tensor after the output is the weights
      (B, heads, Lq, Lk), as Hugging Face attention modules do (``BertSelfAttention``,
      ``GPT2Attention``, ``ViTAttention``: ``(output, weights)``; T5's: ``(output, position_bias,
      weights)``); checked to be softmaxed weights. While attached, a module with a ``config`` (or
      submodules with one) runs with ``config._attn_implementation = 'eager'`` (SDPA and flash
      attention compute no weights).
    * any module that offers its weights through a capture point inside its forward,
      ``capture_debug_state(component, 'attention_weights', weights, {'grid': (h, w)})``.

    Padding: a Hugging Face module called with a 4-D mask (``attention_mask``, T5's ``mask``, a cross-attention's
    ``encoder_attention_mask``, by name or by position) is cropped by it (its own padding, not the encoder's; see
    ``_keys_seen``). Where the layer gives no mask, the batch's (B, L) mask of the layer's tokens (nonzero: real
    token, as Hugging Face's ``attention_mask``): ``datapoint['inputs'][mask_key]``, or in a batch that also
    holds a decoder's inputs, ``'decoder_' + mask_key`` for a decoder's layer (see ``_is_decoder``). Each
    datapoint's attention is then cropped to its real queries and keys, and its entropy averages over real
    queries only, so it does not depend on the batch it came in.

    Output ``{'kind': 'attention', 'layer_name', 'attention': (B, heads, Lq, Lk)`` (or one
    cropped (heads, nq, nk) per datapoint)``, 'entropy_per_head': (B, heads)`` (mean over real
    queries of -sum p log p, in nats)``, 'max_attention': (B,), 'grid': [h, w] or None}``.
    """

    batch_mode = BATCHED  # outputs with the batch first (debuggers/batch_mode.py)

    def __init__(self, layer_name: str, state: str = "attention_weights", mask_key: str = "attention_mask") -> None:
        super().__init__(layer_name)
        self.state = state
        self.mask_key = mask_key
        self._inside = False
        self._offered: Optional[tuple[Any, Optional[dict]]] = None
        self._requested = (True, True)
        self._padding: tuple[Optional[torch.Tensor], Optional[torch.Tensor]] = (None, None)
        self._layer_mask: tuple[Optional[torch.Tensor], bool] = (None, False)  # the call's 4-D mask, whether cross
        self._signature: Optional[inspect.Signature] = None  # the layer's forward, to read positional masks
        self._decoder: Optional[bool] = None  # whether the layer is a decoder's, where it says (see _is_decoder)
        self._windowed = False  # whether the layer computes windowed attention (Swin's), for _check_batch

    def attach(self, model: torch.nn.Module) -> list[Removable]:
        layer = require_layer(model, self.layer_name)
        self._signature, self._decoder, self._windowed = _signature(layer), _is_decoder(layer), _is_windowed(layer)
        if isinstance(layer, nn.MultiheadAttention):
            return [layer.register_forward_pre_hook(self._force_weights, with_kwargs=True),
                    layer.register_forward_hook(self.forward_hook_fn),
                    layer.register_forward_hook(self._give_caller_its_output, with_kwargs=True)]
        return [*_eager_attention(layer), layer.register_forward_pre_hook(self._enter, with_kwargs=True),
                listen(self._on_capture, debug_mode=True),
                layer.register_forward_hook(self.forward_hook_fn)]

    # ------------------------------------------------------ nn.MultiheadAttention
    def _force_weights(self, module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        arguments = _MHA_SIGNATURE.bind(module, *args, **kwargs).arguments
        arguments.pop("self")
        self._requested = (bool(arguments.get("need_weights", True)), bool(arguments.get("average_attn_weights", True)))
        self._padding = _mha_padding(arguments)
        return (), {**arguments, "need_weights": True, "average_attn_weights": False}

    def _give_caller_its_output(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
        need_weights, average = self._requested
        if not need_weights:
            return output[0], None
        return (output[0], output[1].mean(dim=-3)) if average else output

    # ---------------------------------------------------------- capture points
    def _enter(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        self._inside, self._offered = True, None
        self._layer_mask = _own_mask(_arguments(self._signature, args, kwargs))

    def _on_capture(self, component: str, state: str, data: Any, metadata: Optional[dict]) -> None:
        if self._inside and state == self.state:
            _discard(self._offered)
            self._offered = self._copied(data, metadata)

    def _copied(self, weights: Any, metadata: Optional[dict],
                padding: tuple[Optional[torch.Tensor], Optional[torch.Tensor]] = (None, None)) -> _Capture:
        """A copy of the weights as offered (later in-place changes must not leak in), its row statistics
        started at once, beside the rest of the forward pass."""
        if not isinstance(weights, torch.Tensor) or weights.ndim not in (3, 4):
            return _Capture(copy_arrays(weights), metadata, *padding)  # refused by attention_output
        copy = self._pool.copy_of(weights)
        return _Capture(copy, metadata, *padding, RowStatistics(copy, self._pool))

    # ------------------------------------------------------------------ output
    def process_forward(self, module: nn.Module, input: Any, output: Any) -> _Capture:
        _discard(self.last_capture)  # the layer ran again in this forward pass: only this call is kept
        if isinstance(module, nn.MultiheadAttention):  # copied: the caller may change its weights in place
            return self._copied(output[1], None, self._padding)
        self._inside = False
        if self._offered is not None:
            return self._with_layer_padding(self._offered)
        element = _weights_element(output)
        if element is not None:
            capture = self._copied(output[element], None)
            capture.element = element
            return self._with_layer_padding(capture)
        raise RuntimeError(
            f"layer '{self.layer_name}' ({type(module).__name__}) ran but offered no '{self.state}': "
            "AttentionDebugger reads nn.MultiheadAttention, a module returning (output, weights) with weights "
            f"(B, heads, Lq, Lk) (Hugging Face attention modules), or a module whose forward calls "
            f"capture_debug_state(name, '{self.state}', weights)")

    def _with_layer_padding(self, capture: _Capture) -> _Capture:
        """Which keys the layer's own mask shows, taken while the call's mask is at hand (see ``_keys_seen``)."""
        mask, capture.cross = self._layer_mask
        if mask is not None:
            capture.seen = _keys_seen(mask, capture.cross, capture.weights)
        return capture

    def __call__(self, datapoint: dict[str, Any], model: torch.nn.Module) -> Any:
        capture = super().__call__(datapoint, model)
        if not isinstance(capture, _Capture):
            return capture  # None: the layer did not run (or this batch's record, called again)
        _check_batch(self.layer_name, capture.weights, datapoint, self._windowed)
        if capture.rows is not None and capture.key_real is None:  # not nn.MultiheadAttention's own padding
            inputs = datapoint["inputs"] if isinstance(datapoint.get("inputs"), dict) else {}
            capture.query_real, capture.key_real = self._real_tokens(capture, inputs)
        if capture.element is not None:
            _check_probabilities(self.layer_name, model, capture)
        self.last_capture = attention_output(self.layer_name, capture)
        return self.last_capture

    def _real_tokens(self, capture: _Capture, inputs: dict) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
        """(query_real, key_real): the layer's own mask where it has one, else the batch's mask of its tokens."""
        weights = capture.weights
        seen = capture.seen.cpu() if capture.seen is not None else None  # here, not in the hook: no sync mid-forward
        if capture.cross:  # keys: the encoder's tokens (the batch's mask_key); queries: the decoder's
            keys = seen if seen is not None else _real(inputs.get(self.mask_key), weights, -1)
            return _real(inputs.get(_DECODER + self.mask_key), weights, -2), keys
        if seen is not None and weights.shape[-2] == weights.shape[-1]:
            return seen, seen
        mask, ambiguous = self._batch_mask(inputs)
        if seen is not None:  # a step over a key/value cache: one or a few queries, more keys
            real = None, _cached_keys(seen, mask)
        else:
            real = _padding_from_inputs(mask, weights)
        if ambiguous and real[1] is not None and not bool(real[1].all()):
            raise ValueError(
                f"layer '{self.layer_name}' was given no attention mask of its own, and the batch holds decoder "
                f"inputs beside inputs['{self.mask_key}'], which has padding: whether that is this layer's padding "
                "(an encoder's layer) or another's (a decoder's) is unknown, and cropping by another's would show "
                "wrong tokens. Say which: pass the layer its 4-D attention_mask, give the module an attribute "
                f"is_decoder (True: cropped by inputs['{_DECODER}{self.mask_key}']; False: by "
                f"inputs['{self.mask_key}']) as Hugging Face's attention modules have, or set mask_key")
        return real

    def _batch_mask(self, inputs: dict) -> tuple[Any, bool]:
        """The batch's (B, L) mask of this layer's tokens, and whether that is a guess: in a batch that also
        holds a decoder's inputs (``decoder_input_ids``) ``inputs[mask_key]`` is the encoder's, and a decoder's
        layer is cropped by ``inputs['decoder_' + mask_key]`` instead; a layer that does not say which it is
        gets ``inputs[mask_key]``, flagged."""
        if self.mask_key.startswith(_DECODER) or not any(str(key).startswith(_DECODER) for key in inputs):
            return inputs.get(self.mask_key), False
        if self._decoder is None:
            return inputs.get(self.mask_key), True
        return inputs.get(_DECODER + self.mask_key if self._decoder else self.mask_key), False

    def summary_columns(self, output: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Entropy per head (the first 8 heads), its mean, min and max over heads, and the largest weight
        (a NaN propagates)."""
        entropy = as_tensor(output["entropy_per_head"]).double()
        entropy = entropy.reshape(len(entropy), -1)
        heads = {f"entropy_head{h}": entropy[:, h] for h in range(min(entropy.shape[1], MAX_SUMMARY_HEADS))}
        return {"entropy_mean": entropy.mean(1), "entropy_min": entropy.amin(1), "entropy_max": entropy.amax(1),
                "max_attention": output["max_attention"], **heads}

    def clear(self) -> None:
        _discard(self.last_capture)
        _discard(self._offered)
        super().clear()
        self._inside, self._offered, self._padding, self._layer_mask = False, None, (None, None), (None, False)


def _discard(capture: Any) -> None:
    """A capture that will not be used: its row statistics are not computed, or not waited for."""
    if isinstance(capture, _Capture) and capture.rows is not None:
        capture.rows.cancel()


def _eager_attention(layer: nn.Module) -> list[Removable]:
    """Make a Hugging Face attention layer compute its weights while attached (its own config, or its
    submodules', as T5's layer wraps the module that has one); handles put them back."""
    configs = {id(module.config): module.config for module in layer.modules()
               if getattr(getattr(module, "config", None), "_attn_implementation", _EAGER) != _EAGER}
    restores = [_Restore(config, config._attn_implementation) for config in configs.values()]
    for config in configs.values():
        config._attn_implementation = _EAGER
    return restores


class _Restore:
    def __init__(self, config: Any, implementation: str) -> None:
        self.config, self.implementation = config, implementation

    def remove(self) -> None:
        self.config._attn_implementation = self.implementation


def _mha_padding(arguments: dict) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """(query_real, key_real) of one nn.MultiheadAttention call, from its nested query or key_padding_mask."""
    query = arguments["query"]
    if query.is_nested:  # nn.TransformerEncoder's fast path: padding already removed, rows padded with zeros
        lengths = torch.tensor([t.shape[0] for t in query.unbind()])
        real = torch.arange(int(lengths.max()))[None, :] < lengths[:, None]
        return real, real
    mask = arguments.get("key_padding_mask")
    if mask is None:
        return None, None
    key_real = ~mask if mask.dtype == torch.bool else mask > PADDING_BIAS
    key_real = key_real.detach().cpu()
    self_attention = arguments["key"] is query and query.shape[:2] == arguments["value"].shape[:2]
    return (key_real if self_attention else None), key_real


def _weights_element(output: Any) -> Optional[int]:
    """Where a module returning a tuple keeps its attention weights: its last 4-D tensor after the first
    element. Hugging Face modules return (output, weights); T5's return (output, position_bias, weights)."""
    if not isinstance(output, tuple):
        return None
    found = [i for i, item in enumerate(output[1:], 1) if isinstance(item, torch.Tensor) and item.ndim == 4]
    return found[-1] if found else None


def _signature(layer: nn.Module) -> Optional[inspect.Signature]:
    """The layer's forward signature, read once at attach, to name the arguments of each call."""
    try:
        return inspect.signature(layer.forward)
    except (TypeError, ValueError):  # a forward Python cannot describe: its calls' keywords are all that is known
        return None


def _arguments(signature: Optional[inspect.Signature], args: tuple, kwargs: dict) -> dict[str, Any]:
    """A call's arguments by name, positional ones too: BertLayer passes its attention modules their masks and
    encoder states by position."""
    if signature is None:
        return dict(kwargs)
    try:
        named = dict(signature.bind(*args, **kwargs).arguments)
    except TypeError:  # a call the signature does not describe
        return dict(kwargs)
    for name, parameter in signature.parameters.items():
        if parameter.kind is parameter.VAR_KEYWORD:  # **kwargs: its keywords by their own names
            named.update(named.pop(name, {}))
    return named


def _own_mask(arguments: dict[str, Any]) -> tuple[Optional[torch.Tensor], bool]:
    """The 4-D mask a Hugging Face attention module was called with (None if none), and whether the call is a
    cross-attention (keys from ``key_value_states`` or ``encoder_hidden_states``)."""
    cross = any(arguments.get(name) is not None for name in _CROSS_ARGUMENTS)
    mask = next((arguments[name] for name in (_CROSS_MASKS if cross else _SELF_MASKS)
                 if isinstance(arguments.get(name), torch.Tensor)), None)
    return (mask if mask is not None and mask.ndim == 4 else None), cross


def _is_decoder(layer: nn.Module) -> Optional[bool]:
    """Whether the layer belongs to an encoder-decoder's decoder, as Hugging Face's attention modules (and
    their wrappers' submodules) say with ``is_decoder``; None where no module says."""
    flags = {module.is_decoder for module in layer.modules() if isinstance(getattr(module, "is_decoder", None), bool)}
    return True if True in flags else (False if flags else None)


def _is_windowed(layer: nn.Module) -> bool:
    """Whether the layer computes windowed attention: Hugging Face's Swin modules keep a ``window_size``."""
    return any(getattr(module, "window_size", None) is not None for module in layer.modules())


def _check_batch(layer_name: str, weights: Any, datapoint: dict[str, Any], windowed: bool) -> None:
    """Refuse weights whose first dimension is not the batch, saying why: a model that repeats its batch (beam
    search, ``num_return_sequences``, test-time augmentation) or splits it into windows (Swin's attention
    computes each window of each datapoint as a row of its own) gives several rows per datapoint, and which
    rows are whose is the model's layout, so splitting them by a guess could give one datapoint another's."""
    try:
        batch = batch_size_of(datapoint)
    except ValueError:  # inputs with no batch-first tensor: the batch split says what is wrong
        return
    rows = weights.shape[0] if isinstance(weights, torch.Tensor) and weights.ndim else None
    if rows is None or rows == batch:
        return
    if rows % batch:
        raise ValueError(f"layer '{layer_name}' gave attention weights {describe(weights)} for a batch of {batch}: "
                         "their first dimension must be the batch; point layer_name at the attention module itself")
    advice = (
        "see what the windowed attention gives each datapoint through a layer after the windows are put back "
        "together (LayerOutputDebugger or ActivationStatsDebugger on, in Hugging Face's Swin, "
        "'swin.encoder.layers.0.blocks.1.layernorm_after', (B, tokens, channels)), or offer each datapoint's "
        "windows from the model's forward with capture_debug_state(name, 'attention_weights', "
        "weights.view(batch, windows * heads, N, N)) in the model's own window order") if windowed else (
        "capture a forward pass that runs the batch as given (one sequence per datapoint: num_beams=1, "
        "num_return_sequences=1, no augmentation copies), or offer the weights from the model's forward with "
        "capture_debug_state(name, 'attention_weights', weights) in (B, heads, Lq, Lk), one row per datapoint")
    raise ValueError(
        f"layer '{layer_name}' gave attention weights {describe(weights)}: {rows} rows, {rows // batch} per datapoint "
        f"of the batch of {batch}. The model repeats or splits its batch: beam search, num_return_sequences, "
        "augmentation, or windowed attention such as Swin's, which computes each window of each datapoint as a "
        "row of its own. AttentionDebugger shows attention over a whole datapoint and will not guess which rows "
        f"are whose: {advice}")


def _check_probabilities(layer_name: str, model: nn.Module, capture: _Capture) -> None:
    """Refuse a tensor found in a layer's output tuple that is not softmaxed weights (a position bias, scores
    before the softmax): the first real query row of every datapoint and head must be non-negative and sum to 1
    to the rounding of the weights' dtype (or be all zero, or NaN). A padded query row may be anything (a row
    that sees no key is NaN, or uniform over the masked keys)."""
    weights = capture.weights
    first = torch.zeros(weights.shape[0], dtype=torch.long) if capture.query_real is None \
        else capture.query_real.long().argmax(-1)
    rows = weights[torch.arange(weights.shape[0]), ..., first.to(weights.device), :].float()
    tolerance = _sum_tolerance(weights.dtype, weights.shape[-1])
    sums = rows.sum(-1)
    wrong = (rows < 0).any(-1) | (((sums - 1).abs() > tolerance) & (sums.abs() > tolerance))
    if bool(wrong.any()):
        found = tuple(int(i) for i in wrong.nonzero()[0])
        where = f"datapoint {found[0]}, head {found[1]}" if rows.ndim == 3 else f"datapoint {found[0]}"
        raise ValueError(
            f"layer '{layer_name}' returned a 4-D tensor as element {capture.element} of its output, but it is not "
            f"attention weights: query row {int(first[found[0]])} of {where} sums to {float(sums[found]):.4g} "
            f"with its smallest weight {float(rows[found].min()):.4g} (softmaxed weights are >= 0 and sum to 1). "
            f"Point layer_name at the module whose output holds the weights after the softmax"
            f"{', and evaluate the model in eval mode (dropout rescales them)' if model.training else ''}, or offer "
            f"them from its forward with capture_debug_state(name, 'attention_weights', weights)")


def _sum_tolerance(dtype: torch.dtype, keys: int) -> float:
    """How far from 1 a row of softmaxed weights of ``dtype`` may sum: each weight is rounded to the dtype
    (bfloat16 keeps 8 bits: a row sums to 1.002), and the roundings add up as a random walk over the keys."""
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    return max(_SUM_TOLERANCE, 4 * eps * math.sqrt(max(keys, 1)))


def _keys_seen(mask: torch.Tensor, cross: bool, weights: Any) -> Optional[torch.Tensor]:
    """(B, Lk) the keys a Hugging Face attention layer's own (B or 1, 1 or heads, Lq or 1, Lk) mask shows (additive
    float: a value <= -1e4 hides the key; bool: True lets the query see it), where it fits the weights. It is
    this layer's own truth where the batch's ``attention_mask`` may be another's (a decoder's self- or
    cross-attention would be cropped by the encoder's padding). In self-attention over the same tokens
    (Lq == Lk) key j is real if query j may see it, its own token: a causal mask or a sliding window hides real
    keys from some queries, padding hides a key from every query, itself included. Otherwise (a cross-attention,
    a step over a key/value cache), the keys some query may see."""
    if not isinstance(weights, torch.Tensor) or weights.ndim != 4 or mask.shape[0] not in (1, weights.shape[0]) \
            or mask.shape[1] not in (1, weights.shape[1]) or mask.shape[2] not in (1, weights.shape[2]) \
            or mask.shape[3] != weights.shape[3]:
        return None
    allowed = (mask if mask.dtype == torch.bool else mask > PADDING_BIAS).any(dim=1)
    allowed = allowed.expand(weights.shape[0], weights.shape[2], weights.shape[3])
    if not cross and weights.shape[-2] == weights.shape[-1]:
        return allowed.diagonal(dim1=-2, dim2=-1)
    return allowed.any(dim=-2)


def _cached_keys(seen: torch.Tensor, mask: Any) -> Optional[torch.Tensor]:
    """(B, Lk) the real keys of a step over a key/value cache (fewer queries than keys). A key no query may see
    is either padding or a real token outside a sliding window; only the batch's (B, L) mask of the layer's
    tokens tells them apart, its L tokens being the first of the cache (the prompt; later keys were
    generated). Without one that fits, every key is kept: the model gives what it hides weight 0."""
    if not isinstance(mask, torch.Tensor) or mask.ndim != 2 or mask.shape[0] != seen.shape[0] \
            or mask.shape[1] > seen.shape[1]:
        return None
    real = seen.clone()
    real[:, :mask.shape[1]] |= (mask != 0).cpu()
    real[:, mask.shape[1]:] = True
    return real


def _real(mask: Any, weights: torch.Tensor, dim: int) -> Optional[torch.Tensor]:
    """(B, L) which tokens are real by a batch's (B, L) mask (nonzero: real), where L fits ``weights``' ``dim``."""
    if not isinstance(mask, torch.Tensor) or mask.ndim != 2 or weights.ndim != 4 \
            or mask.shape != (weights.shape[0], weights.shape[dim]):
        return None
    return (mask != 0).cpu()


def _padding_from_inputs(mask: Any, weights: torch.Tensor) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """(query_real, key_real) from a (B, L) attention mask of the batch, where its L fits the weights."""
    real = _real(mask, weights, -1)
    return (real if weights.shape[-2] == weights.shape[-1] else None), real


class RowStatistics:
    """Each query row's entropy and largest weight, (B, heads, Lq) each, and the weights as float (B, heads, Lq, Lk).

    Where the forward pass runs on one intra-op thread on the CPU (``torch.get_num_threads() == 1``),
    they are computed on a background thread as soon as the weights are copied, beside the rest of the
    forward pass (NumPy and torch release the GIL in their kernels; a one-thread forward leaves the other
    cores to it). With several intra-op threads the forward pass's OpenMP team already uses the cores,
    and a background thread would bring a team of its own (``torch.set_num_threads`` is process-wide, so
    it cannot be given one thread alone): they are computed in the debugger's call instead, spread over
    the same team, as on a GPU (whose kernels are queued asynchronously anyway).

    Every wait has a way out: the call computes them itself where the thread has not started them (a
    busy machine), after ``WAIT_S`` (the thread starved), or in a forked child (the child's copy of the
    thread does not run). It is pure arithmetic on a private copy, so either way gives the same result.
    """

    WAIT_S = 5.0  # the thread takes milliseconds per batch: a wait this long means it is not running

    def __init__(self, weights: torch.Tensor, pool: BufferPool) -> None:
        self._weights: Optional[torch.Tensor] = weights
        self._pool, self._pid = pool, os.getpid()
        self._one_thread = weights.device.type == "cpu" and torch.get_num_threads() == 1
        self._future: Optional[Future] = background_executor().submit(self._compute) if self._one_thread else None

    def result(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(probs, row entropy, row max); raises what the computation raised (e.g. out of memory)."""
        future, self._future = self._future, None
        if future is not None and os.getpid() == self._pid and not future.cancel():
            try:
                return future.result(timeout=self.WAIT_S)
            except FutureTimeoutError:
                pass
        return self._compute()

    def cancel(self) -> None:
        """Not needed after all (the layer ran again in this forward pass): not computed unless started, and
        the weights' copy is let go at once (a queued job would keep it alive)."""
        future, self._future = self._future, None
        if future is None or os.getpid() != self._pid or future.cancel():
            self._weights = None

    def _compute(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self._weights is None:
            raise RuntimeError("RowStatistics.result() after cancel(): these statistics were cancelled")
        return _row_statistics(self._weights, self._pool, numpy_log=self._one_thread)


_executor: Optional[ThreadPoolExecutor] = None


def background_executor() -> ThreadPoolExecutor:
    """The thread of every AttentionDebugger's row statistics, started on first use."""
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(1, thread_name_prefix="lantern-attention-rows")
    return _executor


def _forget_executor_after_fork() -> None:
    """Threads do not survive a fork: the child starts its own on first use."""
    global _executor
    _executor = None


os.register_at_fork(after_in_child=_forget_executor_after_fork)


def attention_output(layer_name: str, capture: _Capture) -> dict[str, Any]:
    """The attention record of (B, heads, Lq, Lk) (or single-head (B, Lq, Lk)) weights."""
    if capture.rows is None:
        raise TypeError(f"AttentionDebugger needs batched attention weights (B, heads, Lq, Lk) from layer "
                        f"'{layer_name}', got {describe(capture.weights)}; call the layer on a batch")
    probs, entropy, row_max = capture.rows.result()
    if capture.query_real is None:  # every query is real: plain means and maxima over the whole batch
        entropy_per_head, max_attention = entropy.mean(-1), row_max.amax(dim=(1, 2))
    else:
        real_rows = capture.query_real.to(probs.device)[:, None, :]  # a padded row may be NaN: NaN * 0 is NaN
        entropy_per_head = torch.where(real_rows, entropy, 0.0).sum(-1) / real_rows.sum(-1).clamp(min=1)
        max_attention = torch.where(real_rows, row_max, 0.0).amax(dim=(1, 2))
    grid = (capture.metadata or {}).get("grid")
    return {
        "kind": KIND_ATTENTION,
        "layer_name": layer_name,
        "attention": _cropped(probs, capture.query_real, capture.key_real),
        "entropy_per_head": entropy_per_head,
        "max_attention": max_attention,
        "grid": [int(g) for g in grid] if grid is not None else None,
    }


def _row_statistics(weights: torch.Tensor, pool: BufferPool, numpy_log: bool,
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(probs, row entropy -sum p log p in nats (0 log 0 = 0), row max) of (B, heads, Lq, Lk) or (B, Lq, Lk).

    The log of every weight is the costly part: on one CPU thread NumPy's float32 ``log`` takes about
    a third of torch's (0.4 against 1.1 ms per million weights here: ``numpy_log``); several threads share
    torch's, and a GPU has its own.
    On the CPU rows go in chunks of ``_CHUNK`` weights, so the log's scratch is small and every pass over
    a chunk (log, clamp, product, sum, max) reads it from the core's cache; a GPU takes them all at once.
    """
    probs = weights.float()
    probs = probs.unsqueeze(1) if probs.ndim == 3 else probs
    rows = probs.reshape(-1, probs.shape[-1])
    entropy, row_max = (torch.empty(rows.shape[0], dtype=rows.dtype, device=rows.device) for _ in range(2))
    step = max(1, _CHUNK // max(rows.shape[1], 1)) if rows.device.type == "cpu" else max(rows.shape[0], 1)
    scratch = pool.empty_like(rows[:step])
    for start in range(0, rows.shape[0], step):
        chunk = rows[start:start + step]
        log = scratch[:len(chunk)]
        if numpy_log:
            with np.errstate(divide="ignore", invalid="ignore"):  # log 0 = -inf, clamped below; < 0: refused
                np.log(chunk.numpy(), out=log.numpy())
        else:
            torch.log(chunk, out=log)
        log.clamp_(min=torch.finfo(log.dtype).min).mul_(chunk)  # 0 log 0 would be NaN
        torch.sum(log, -1, out=entropy[start:start + step])
        torch.amax(chunk, -1, out=row_max[start:start + step])
    shape = probs.shape[:-1]
    return probs, entropy.neg_().view(shape), row_max.view(shape)


def _cropped(probs: torch.Tensor, query_real: Optional[torch.Tensor], key_real: Optional[torch.Tensor]) -> Any:
    """The weights cropped to each datapoint's real queries and keys: one slice for the whole batch when
    every datapoint has the same real tokens, one ``PerDatapoint`` entry each otherwise."""
    if query_real is None and key_real is None:
        return probs
    batch, _, queries, keys = probs.shape
    query_real = _or_all(query_real, batch, queries, probs.device)
    key_real = _or_all(key_real, batch, keys, probs.device)
    if bool((query_real == query_real[:1]).all()) and bool((key_real == key_real[:1]).all()):
        return probs[:, :, query_real[0]][:, :, :, key_real[0]]
    return PerDatapoint(probs[i][:, query_real[i]][:, :, key_real[i]] for i in range(batch))


def _or_all(real: Optional[torch.Tensor], batch: int, length: int, device: torch.device) -> torch.Tensor:
    if real is None:
        return torch.ones(batch, length, dtype=torch.bool, device=device)
    return real.to(device)

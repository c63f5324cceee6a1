"""``SAM2Visualizer``: the SAM2 guide's visualizer, one method per part of the model, each drawing the tensors it is
given with the viewer's own figures (plotly: what the Datapoint tab and the HTML export draw), returning them and,
with ``save_path``, writing them as one self-contained HTML page. No matplotlib: the guide reads no return value and
no axes of these methods, and its own matplotlib code runs beside them."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

from runners.eval_viewer.export.debug_states import states_of_datapoint
from runners.eval_viewer.export.report import ExportError, write_html
from runners.eval_viewer.figures.attention import MAX_HEADS, attention_heads_figure, entropy_figure
from runners.eval_viewer.figures.base import FIGURE_PX, Figures
from runners.eval_viewer.figures.position_encoding import encoding_figures, similarity_figure
from runners.eval_viewer.figures.sam2 import mask_decoder_figures, principal_components_figures

PX_PER_INCH = 100  # matplotlib's default dpi: ``figsize_base`` (15, 10) draws 1500 px wide, as the guide's did


class SAM2Visualizer:
    """The guide's ``SAM2Visualizer(figsize_base=(15, 10))``.

    Each method takes the guide's states' ``data`` (tensors or arrays, batch first where the model offers a batch:
    ``datapoint`` picks the row drawn) and returns its figures. ``save_path``: a folder (created) that gets one
    HTML page per call, named after the method (and the layer or encoding), or a ``.html`` file. ``show``: show
    each figure as it is drawn, as the guide's ``plt.show()`` did; by default only inside a Jupyter kernel.
    ``figsize_base``: (width, height) in inches at ``PX_PER_INCH``, as matplotlib's: the figures' width (never
    narrower than the viewer's ``FIGURE_PX``, which their captions are laid out for); heights follow the content.
    """

    def __init__(self, figsize_base: tuple[float, float] = (15, 10), show: Optional[bool] = None) -> None:
        if not (isinstance(figsize_base, (tuple, list)) and len(figsize_base) == 2
                and all(isinstance(v, (int, float)) and v > 0 for v in figsize_base)):
            raise ExportError(f"figsize_base is (width, height) in inches, two positive numbers, got {figsize_base!r}")
        self.width = max(FIGURE_PX, round(PX_PER_INCH * figsize_base[0]))
        self.show = "ipykernel" in sys.modules if show is None else show

    def visualize_mask_decoder_states(self, decoder_states: Mapping[str, Any], save_path: Optional[str] = None,
                                      datapoint: int = 0) -> Figures:
        """The mask decoder's states ``{state: data}`` (``sam_mask_decoder``'s): the raw mask logits with each mask's
        predicted IoU, the upsampling stages, the hypernetwork outputs."""
        if not isinstance(decoder_states, Mapping) or not decoder_states:
            raise ExportError("visualize_mask_decoder_states takes the decoder's states as {state name: data}, e.g. "
                              "{name: info['data'] for name, info in debug_states['sam_mask_decoder'].items()}")
        records = {"sam_mask_decoder": {name: {"data": data} for name, data in decoder_states.items()}}
        states = states_of_datapoint(records, datapoint)["states"]
        return self._done(mask_decoder_figures(states), save_path, "mask_decoder_states", "mask decoder")

    def visualize_attention_patterns(self, attention_weights: Any, layer_name: str = "attention",
                                     save_path: Optional[str] = None, max_heads_to_show: int = MAX_HEADS,
                                     datapoint: int = 0, grid: Optional[tuple[int, int]] = None) -> Figures:
        """Attention weights (batch, heads, queries, keys) (or without the batch, or one head): each head's map,
        over the image grid where one side lies on one (``grid``, else a square number of keys facing fewer
        tokens), and each head's entropy."""
        weights = _rows(attention_weights, 4, datapoint, "attention weights (batch, heads, queries, keys)", 2)
        weights = weights.reshape(-1, *weights.shape[-2:])[:max(1, int(max_heads_to_show))]
        figures = [attention_heads_figure(weights, f"{layer_name} attention", grid=list(grid) if grid else None)]
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = -np.nansum(np.where(weights > 0, weights * np.log(weights), 0.0), axis=-1).mean(axis=-1)
        figures.append(entropy_figure(entropy, weights.shape[-1], layer_name))
        return self._done(figures, save_path, f"attention_{layer_name}", f"{layer_name} attention")

    def visualize_position_encoding(self, pos_enc_data: Any, encoding_type: str = "sine",
                                    save_path: Optional[str] = None, show_individual_dims: bool = True,
                                    frequencies: Any = None) -> Figures:
        """A (channels, h, w) position encoding (a batch of one, or its first row): its dimensions over the grid
        (``show_individual_dims``), its top-3 principal components as RGB, how alike it makes each cell to a few
        reference cells, and its ``frequencies`` (the state ``frequency_dimensions``) if given."""
        encoding = _rows(pos_enc_data, 4, 0, "a position encoding (channels, h, w)")
        figures = encoding_figures(encoding, str(encoding_type), None if frequencies is None else _numpy(frequencies),
                                   show_individual_dims, f"position encoding ({encoding_type})")
        similarity = similarity_figure({str(encoding_type): encoding})
        return self._done(figures + ([similarity] if similarity is not None else []), save_path,
                          f"position_encoding_{encoding_type}", f"position encoding ({encoding_type})")

    def visualize_image_embeddings(self, embeddings: Any, original_image: Any = None,
                                   save_path: Optional[str] = None, n_components_to_show: int = 8,
                                   datapoint: int = 0) -> Figures:
        """Image embeddings (batch, channels, h, w): the input beside their top-3 principal components as RGB,
        the first ``n_components_to_show`` components one by one, and the variance each explains."""
        features = _rows(embeddings, 4, datapoint, "image embeddings (batch, channels, h, w)")
        image = None if original_image is None else _image(original_image, datapoint)
        figures = principal_components_figures(features, image, max(1, int(n_components_to_show)), "image embeddings")
        return self._done(figures, save_path, "image_embeddings", "image embeddings")

    def _done(self, figures: Figures, save_path: Optional[str], page: str, title: str) -> Figures:
        """Sized, shown where asked, written as one page where ``save_path`` says, and returned."""
        for figure in figures:
            figure.update_layout(width=self.width)
            if self.show:
                figure.show()
        if save_path is not None:
            path = save_path if save_path.endswith(".html") else os.path.join(save_path, f"{_file_name(page)}.html")
            write_html(path, f"SAM2 debug: {title}", [(title, list(figures))])
        return figures


def _numpy(value: Any) -> np.ndarray:
    """A tensor (on any device, of any dtype: bfloat16 has no NumPy twin) as a float NumPy array; anything else
    (an array, a PIL image, numbers) as NumPy reads it."""
    if hasattr(value, "detach"):
        return value.detach().cpu().float().numpy()
    return np.asarray(value)


def _rows(data: Any, batched: int, datapoint: int, what: str, least: int = 3) -> np.ndarray:
    """``data`` as a float array, row ``datapoint`` of it where it has ``batched`` dimensions (a batch first);
    at least ``least`` dimensions are left."""
    array = _numpy(data)
    if array.dtype.kind not in "biuf" or not least <= array.ndim <= batched:
        raise ExportError(f"expected {what}, got an array of shape {array.shape} and dtype {array.dtype}")
    if array.ndim == batched:
        if not 0 <= datapoint < array.shape[0]:
            raise ExportError(f"datapoint {datapoint} is not in a batch of {array.shape[0]} ({what})")
        array = array[datapoint]
    return array.astype(np.float64)


def _image(image: Any, datapoint: int) -> np.ndarray:
    """An input image (batch, 3, H, W), (3, H, W), (H, W, 3) or a PIL image as an array of one image."""
    array = _numpy(image)
    return array[datapoint] if array.ndim == 4 else array


def _file_name(name: str) -> str:
    """A page's file name from a layer's name: letters, digits, '.', '_' and '-' only."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "figures"


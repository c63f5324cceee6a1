"""Figures of the states a SAM2-style model offers under the SAM2 debug visualization guide's names.

``sam2_state_figures(states, image)`` draws one datapoint's states (``{component: {state: {'data', 'metadata'}}}``,
as a ``CaptureDebugger`` output's ``states``; ``runners.eval_viewer.export.visualize_debug_states`` draws the guide's
``debug_states`` through it, and ``SAM2Visualizer`` its parts):

- the prompt token's cross-attention over the image, per head (columns) and layer (rows), over the input;
- the position encodings, sine and random: individual dimensions, top-3 principal components, frequencies, and the
  two compared (``position_encoding.py``);
- the vision features of each level as the RGB of their top-3 principal components, beside the input, and the final
  features' leading principal components one by one with the variance each explains;
- the mask decoder: its raw mask logits with the predicted IoU of each mask, the upsampling stages, and the
  hypernetwork outputs;
- for a clip (states offered per frame, ``<component>_frame_<t>``): memory attention over earlier frames, per frame;
- a table of every state: shape, mean, std, range, and a warning for NaN, Inf or no variance (the guide's
  ``analyze_debug_states``).
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional

import numpy as np
import plotly.graph_objects as go

from debuggers.capture import frame_component, split_frame
from runners.eval_viewer.figures.base import (
    AXIS_TITLES,
    IMAGE_AXIS,
    JET,
    NARROW_BAR_MARGIN,
    SHARED,
    Figures,
    display_image,
    finish,
    finished,
    image_axes,
    image_source,
    labelled_mosaic,
    maps_figure,
    narrow_colour_bar,
    pca_rgb,
    plain_figure,
    table_figure,
    title_number,
)
from runners.eval_viewer.figures.position_encoding import encoding_figures, similarity_figure

SAM2_COMPONENTS = ("image_encoder", "position_encoding_sine", "position_encoding_random", "prompt_encoder",
                   "sam_mask_decoder")
ENCODINGS = {"position_encoding_sine": "sine", "position_encoding_random": "random"}  # component: encoding type
TRANSFORMER = re.compile(r"two_way_transformer_(?:layer_(\d+)|final)$")
MEMORY_COMPONENT = "memory_attention"
PROMPT_TOKEN = "prompt_0"
MAX_HEADS = 8
MAX_PANELS = 6
LOW_VARIANCE = 1e-6
FEATURE_STATES = ("trunk_features_level_", "fpn_features_level_", "vision_features_final")
UPSAMPLING_STATES = {"input_image_embeddings": "image embeddings", "upscaled_embedding_stage_1": "transposed conv x2",
                     "upscaled_embedding_final": "+ high-res level, normalised"}  # state: its caption
PCA_COMPONENTS = 8
PromptPoints = Optional[np.ndarray]
States = dict[str, dict[str, Any]]


def is_sam2_states(states: Any) -> bool:
    """Whether captured ``states`` hold any of the guide's components (or their per-frame copies)."""
    return isinstance(states, dict) and any(
        _base(component) in SAM2_COMPONENTS or TRANSFORMER.match(_base(component)) or
        _base(component) == MEMORY_COMPONENT for component in states)


def sam2_state_figures(states: States, image: Optional[np.ndarray] = None) -> Figures:
    """All the figures above for one datapoint's ``states``; ``image`` is its input (drawn under the attention),
    else the ``input_image`` the image encoder offered, if kept."""
    first = _first_frame(states)
    if image is None:
        image = _array(states, f"image_encoder{first}", "input_image")
    points = _prompt_points(states, first)
    figures = [*prompt_attention_figures(states, image, points, first), *position_encoding_figures(states, first),
               *feature_figures(states, image, first), *mask_decoder_figures(states, first),
               *memory_attention_figures(states), states_table(states)]
    return [figure for figure in figures if figure is not None]


# ------------------------------------------------------------------ helpers
def _numpy(data: Any) -> Any:
    if hasattr(data, "detach"):  # a torch tensor, as the guide's states hold
        return data.detach().cpu().float().numpy()
    return data


def _base(component: str) -> str:
    return split_frame(component)[0]


def _first_frame(states: States) -> str:
    """The suffix of the first (prompted) frame's components ('_frame_0'), or '' for an image's states."""
    frames = [frame for component in states if (frame := split_frame(component)[1]) is not None]
    return frame_component("", min(frames)) if frames else ""


def _array(states: States, component: str, state: str) -> Optional[np.ndarray]:
    record = (states.get(component) or {}).get(state)
    data = _numpy(record.get("data")) if isinstance(record, dict) else None
    return np.asarray(data, dtype=np.float64) if isinstance(data, np.ndarray) and data.dtype.kind in "biuf" else None


def _metadata(states: States, component: str, state: str) -> dict[str, Any]:
    record = (states.get(component) or {}).get(state)
    return dict(record.get("metadata") or {}) if isinstance(record, dict) else {}


def _shared(figure: go.Figure) -> go.Figure:
    """Marked as the same for every datapoint (the viewer folds it away, the export draws it once)."""
    figure.update_layout(title_text=f"{figure.layout.title.text} · {SHARED}",
                         meta={**(figure.layout.meta or {}), "shared": True})
    return figure


def _prompt_points(states: States, suffix: str) -> PromptPoints:
    """The prompt points (N, 2) as (x, y) in [0, 1] of the image, where the prompt encoder offered them."""
    points = _array(states, f"prompt_encoder{suffix}", "point_coords_normalized")
    return points.reshape(-1, 2) if points is not None and points.size % 2 == 0 else None


def _resized(picture: np.ndarray, height: int, width: int) -> np.ndarray:
    """Nearest-neighbour resize of an (H, W, 3) picture."""
    rows = np.minimum((np.arange(height) * picture.shape[0] / height).astype(int), picture.shape[0] - 1)
    cols = np.minimum((np.arange(width) * picture.shape[1] / width).astype(int), picture.shape[1] - 1)
    return picture[rows[:, None], cols[None, :]]


# ---------------------------------------------------------------- attention
def transformer_layers(states: States, suffix: str = "") -> list[tuple[str, np.ndarray, dict]]:
    """``(component, weights (heads, queries, keys), metadata)`` of each two-way transformer layer's
    ``attention_weights``, in depth order, the final attention last."""
    found = []
    for component in states:
        if not component.endswith(suffix):
            continue
        match = TRANSFORMER.match(component[:len(component) - len(suffix)] if suffix else component)
        weights = _array(states, component, "attention_weights")
        if match and weights is not None and weights.ndim == 3:
            order = int(match.group(1)) if match.group(1) is not None else math.inf
            found.append((order, component, weights, _metadata(states, component, "attention_weights")))
    return [(component, weights, meta) for _, component, weights, meta in sorted(found, key=lambda item: item[0])]


def prompt_attention_figures(states: States, image: Optional[np.ndarray] = None, points: PromptPoints = None,
                             suffix: str = "", token: str = PROMPT_TOKEN) -> Figures:
    """The ``token``'s attention over the image grid, one tile per head (columns) and layer (rows), stretched over
    the input when it is given, the prompt marked; one colour scale for all, so the layers compare."""
    layers = transformer_layers(states, suffix)
    if not layers:
        return []
    grid = layers[0][2].get("grid")
    names = list(layers[0][2].get("query_tokens") or [])
    keys = layers[0][1].shape[-1]
    if not grid or int(grid[0]) * int(grid[1]) != keys:
        side = math.isqrt(keys)
        if side * side != keys:
            return []
        grid = (side, side)
    height, width = int(grid[0]), int(grid[1])
    query = names.index(token) if token in names else layers[0][1].shape[1] - 1
    heads = min(layers[0][1].shape[0], MAX_HEADS)
    maps = [[weights[h, query].reshape(height, width) for h in range(min(heads, len(weights)))]
            for _, weights, _ in layers]
    scale = max(1, round(image.shape[-2] / height)) if image is not None else 1
    heat, annotations, tile = labelled_mosaic(maps, [_layer_label(component) for component, _, _ in layers],
                                              [f"head {c}" for c in range(heads)], scale)
    data: list[dict[str, Any]] = []
    if image is not None:  # a PNG: the input repeated in every tile packs to a few kB, as an array it was 100 kB
        picture = _resized(display_image(image), height * scale, width * scale)
        data.append({**image_source(_tiled_picture(picture, tile, len(maps), heads, scale)), "hoverinfo": "skip"})
    data.append({"type": "heatmap", "z": heat.astype(np.float32), "colorscale": JET, "zmin": 0.0,
                 "zmax": float(np.nanmax(heat)), "hoverongaps": False, "opacity": 0.5 if image is not None else 1.0,
                 "x0": (scale - 1) / 2, "dx": scale, "y0": (scale - 1) / 2, "dy": scale,
                 "colorbar": narrow_colour_bar("attention weight"),
                 "hovertemplate": "row %{y:.0f}, col %{x:.0f}: %{z:.3f}<extra></extra>"})
    if points is not None and image is not None:
        xs, ys = points[:, 0] * width * scale - 0.5, points[:, 1] * height * scale - 0.5
        tiles = [(r, c) for r in range(len(maps)) for c in range(heads)]
        data.append({"type": "scatter", "x": [x + c * tile[1] * scale for r, c in tiles for x in xs],
                     "y": [y + r * tile[0] * scale for r, c in tiles for y in ys], "mode": "markers",
                     "marker": {"symbol": "star", "size": 9, "color": "white", "line": {"color": "black", "width": 1}},
                     "name": "prompt", "hoverinfo": "skip"})
    layout = {"annotations": annotations, "showlegend": False, "plot_bgcolor": "white",
              "xaxis": {**IMAGE_AXIS, "scaleanchor": "y"}, "yaxis": {**IMAGE_AXIS, "autorange": "reversed"}}
    label = "prompt" if token == PROMPT_TOKEN else token
    return [finished(data, layout, f"{label} token to image cross-attention, per head (columns) and layer (rows)"
                     f"{' over the input' if image is not None else ''}",
                     120 + 110 * len(maps), {"l": 110, "t": 60, "r": NARROW_BAR_MARGIN})]


def _layer_label(component: str) -> str:
    match = TRANSFORMER.match(_base(component))
    return "final" if match is None or match.group(1) is None else f"layer {match.group(1)}"


def _tiled_picture(picture: np.ndarray, tile: tuple[int, int], rows: int, columns: int, scale: int) -> np.ndarray:
    """The picture repeated in every tile of the mosaic (white between)."""
    canvas = np.full(((rows * tile[0] - 1) * scale, (columns * tile[1] - 1) * scale, 3), 255, dtype=np.uint8)
    for r in range(rows):
        for c in range(columns):
            top, left = r * tile[0] * scale, c * tile[1] * scale
            canvas[top:top + picture.shape[0], left:left + picture.shape[1]] = picture
    return canvas


# --------------------------------------------------------- position encoding
def position_encoding_figures(states: States, suffix: str = "") -> Figures:
    """Each position encoding's dimensions, principal components and frequencies (``position_encoding.py``), and,
    where the model has both, the sine and the random encodings compared by how alike they make positions."""
    figures: Figures = []
    encodings = {}
    for component, encoding_type in ENCODINGS.items():
        encoding = _array(states, component + suffix, "position_embeddings_final")
        if encoding is None or encoding.ndim != 3:
            continue
        encodings[f"{encoding_type} ({component})"] = encoding
        figures += encoding_figures(encoding, encoding_type,
                                    _array(states, component + suffix, "frequency_dimensions"), name=component)
    compared = similarity_figure(encodings) if len(encodings) > 1 else None
    return [_shared(figure) for figure in ([compared] if compared is not None else []) + figures]


# ------------------------------------------------------------------ features
def feature_figures(states: States, image: Optional[np.ndarray] = None, suffix: str = "") -> Figures:
    """The input beside the top-3 principal components (as RGB) of each level's features: one figure of panels;
    and the final vision features' leading principal components one by one (``principal_components_figures``)."""
    component = f"image_encoder{suffix}"
    panels = [("input", display_image(image))] if image is not None else []
    for state in (states.get(component) or {}):
        data = _array(states, component, state)
        if data is not None and data.ndim == 3 and state.startswith(FEATURE_STATES):
            panels.append((state.replace("_features", "").replace("_level_", " level "), pca_rgb(data)))
    if len(panels) <= (1 if image is not None else 0):
        return []
    figures = [pca_panels_figure(panels, "vision features: top-3 principal components as RGB, per level")]
    final = _array(states, component, "vision_features_final")
    if final is not None and final.ndim == 3:
        figures += principal_components_figures(final, None, PCA_COMPONENTS, "vision_features_final")[1:]  # its
        # top-3 as RGB is in the figure above
    return figures


def pca_panels_figure(panels: list[tuple[str, np.ndarray]], title: str) -> go.Figure:
    """Pictures (H, W, 3) side by side, each captioned, at most ``MAX_PANELS`` of them."""
    panels = panels[:MAX_PANELS + 1]
    width = 1 / len(panels)
    data, layout = [], {"annotations": []}
    for i, (caption, picture) in enumerate(panels):
        suffix_axis = "" if i == 0 else str(i + 1)
        data.append({"type": "image", "z": picture, "xaxis": f"x{suffix_axis}", "yaxis": f"y{suffix_axis}",
                     "hoverinfo": "skip"})
        layout[f"xaxis{suffix_axis}"] = {"domain": [i * width + 0.01, (i + 1) * width - 0.01],
                                         "anchor": f"y{suffix_axis}"}
        layout[f"yaxis{suffix_axis}"] = {"domain": [0, 0.88], "anchor": f"x{suffix_axis}"}
        layout["annotations"].append({"text": caption, "x": 0.5, "y": 1.0, "xref": f"x{suffix_axis} domain",
                                      "yref": f"y{suffix_axis} domain", "yanchor": "bottom", "showarrow": False,
                                      "font": {"size": 10}})
    return finish(image_axes(plain_figure(data, layout)), title, 260)


def principal_components_figures(features: np.ndarray, image: Optional[np.ndarray] = None,
                                 components: int = PCA_COMPONENTS, name: str = "embeddings") -> Figures:
    """(C, H, W) features as principal components over the pixels: the input (if given) beside the top-3 as RGB;
    each of the first ``components`` as a map captioned with the share of the variance it explains; and that share
    for every component, with its running total (how many directions the features really use)."""
    channels, height, width = features.shape
    samples = np.nan_to_num(features.reshape(channels, -1).T.astype(np.float64))
    samples -= samples.mean(axis=0)
    u, singular, _ = np.linalg.svd(samples, full_matrices=False)
    share = singular ** 2 / max(float((singular ** 2).sum()), 1e-12)
    shown = min(components, len(singular))
    panels = ([("input", display_image(image))] if image is not None else []) + [("top-3 as RGB", pca_rgb(features))]
    maps = [(u[:, k] * singular[k]).reshape(height, width) for k in range(shown)]
    figures = [pca_panels_figure(panels, f"{name}: its top-3 principal components as RGB"),
               maps_figure(maps, [f"PC {k + 1}: {share[k]:.0%}" for k in range(shown)],
                           f"{name}: its first {shown} principal components, each with its share of the variance",
                           "component")]
    bars = go.Figure([go.Bar(x=np.arange(1, len(share) + 1), y=share, name="share"),
                      go.Scatter(x=np.arange(1, len(share) + 1), y=np.cumsum(share), name="running total")])
    bars.update_xaxes(title_text="principal component")
    bars.update_yaxes(title_text="share of the variance", range=[0, 1.02])
    bars.update_layout(legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 1, "xanchor": "right"})
    figures.append(finish(bars, f"{name}: variance explained by each principal component", 260, AXIS_TITLES))
    return figures


# ------------------------------------------------------------- mask decoder
def mask_decoder_figures(states: States, suffix: str = "") -> Figures:
    """The raw mask logits (before upsampling) captioned with each mask's predicted IoU; the upsampling stages, each
    as the RGB of its top-3 principal components; and the hypernetwork outputs, the weight each mask token gives each
    channel of the upscaled embedding."""
    component = f"sam_mask_decoder{suffix}"
    figures: Figures = []
    masks = _array(states, component, "raw_masks_output")
    ious = _array(states, component, "iou_predictions")
    if masks is not None and masks.ndim == 3:
        captions = [f"mask {i}" + (f": predicted IoU {title_number(ious.reshape(-1)[i])}" if ious is not None and
                                   ious.size > i else "") for i in range(len(masks))]
        figures.append(maps_figure(list(masks), captions, f"{component}.raw_masks_output: mask logits at "
                                   f"{masks.shape[1]}x{masks.shape[2]}, before upsampling",
                                   "mask logit"))
    stages = [(caption, pca_rgb(data)) for state, caption in UPSAMPLING_STATES.items()
              if (data := _array(states, component, state)) is not None and data.ndim == 3]
    if stages:
        figures.append(pca_panels_figure(stages, f"{component}: the upsampling, each stage's top-3 principal "
                                                 "components as RGB"))
    hyper = sorted((state for state in (states.get(component) or {}) if state.startswith("hypernetwork_output_")),
                   key=lambda state: int(state.rsplit("_", 1)[1]) if state.rsplit("_", 1)[1].isdigit() else 0)
    if hyper:
        fig = go.Figure()
        for state in hyper:
            values = _array(states, component, state)
            if values is not None:
                values = values.reshape(-1)
                fig.add_trace(go.Bar(x=np.arange(len(values)), y=values, name=state.replace("hypernetwork_output_",
                                                                                            "mask ")))
        fig.update_layout(barmode="group", legend={"orientation": "h", "y": -0.25})
        fig.update_xaxes(title_text="channel of the upscaled embedding", dtick=1)
        fig.update_yaxes(title_text="weight")
        figures.append(finish(fig, f"{component}: hypernetwork outputs, the weight each mask token gives each "
                              "channel of the upscaled embedding", 300, {"l": 60, "b": 80}))
    return figures


# ------------------------------------------------------------------- memory
def memory_attention_figures(states: States) -> Figures:
    """For a clip: each captured frame's memory attention, as the share of its attention on each earlier frame
    (frames down, memory frames across), and where in each memory frame it looks."""
    frames = []
    for component in states:
        base, frame = split_frame(component)
        weights = _array(states, component, "attention_weights") if frame is not None and base == MEMORY_COMPONENT \
            else None
        if weights is not None and weights.ndim == 3:
            frames.append((frame, weights, _metadata(states, component, "attention_weights")))
    if not frames:
        return []
    frames.sort(key=lambda item: item[0])
    last = max(max([*meta.get("memory_frames", []), t]) for t, _, meta in frames)
    shares = np.full((len(frames), last + 1), np.nan)
    spatial, captions = [], []
    for row, (t, weights, meta) in enumerate(frames):
        memory = [int(m) for m in meta.get("memory_frames", [])]
        if not memory or weights.shape[-1] % len(memory):
            continue
        per_frame = weights.mean(axis=(0, 1)).reshape(len(memory), -1)  # heads and queries averaged
        shares[row, memory] = per_frame.sum(axis=1)
        grid = meta.get("grid")
        if grid and int(grid[0]) * int(grid[1]) == per_frame.shape[1]:
            spatial += [values.reshape(int(grid[0]), int(grid[1])) for values in per_frame]
            captions += [f"frame {t} → {m}" for m in memory]
    matrix = go.Figure(go.Heatmap(z=shares, x=list(range(last + 1)), y=[f"frame {t}" for t, _, _ in frames],
                                  colorscale="Viridis", zmin=0, zmax=1, hoverongaps=False,
                                  texttemplate="%{z:.2f}", hovertemplate="%{y} on frame %{x}: %{z:.3f}<extra></extra>"))
    matrix.update_xaxes(title_text="memory frame", dtick=1)
    matrix.update_yaxes(autorange="reversed")
    figures = [finish(matrix, "memory attention: the share of each frame's attention on each earlier frame",
                      140 + 34 * len(frames), {"l": 80, "b": 45})]
    if spatial:
        figures.append(maps_figure(spatial[:4 * MAX_PANELS], captions[:4 * MAX_PANELS],
                                   "memory attention over each memory frame's grid (heads and queries averaged)",
                                   "attention weight"))
    return figures


# -------------------------------------------------------------------- table
def states_table(states: States) -> Optional[go.Figure]:
    """Every state's shape and statistics, flagged where it holds NaN or Inf or has no variance."""
    rows = []
    for component, component_states in states.items():
        for state in component_states:
            data = _array(states, component, state)
            if data is None:
                continue
            rows.append((f"{component}.{state}", _describe(data)))
    return table_figure(rows, "captured states: shape, mean ± std, range", ("state", "statistics")) if rows else None


def _describe(data: np.ndarray) -> str:
    finite = data[np.isfinite(data)]
    text = f"{list(data.shape)}"
    if finite.size:
        text += f"  {finite.mean():.4g} ± {finite.std():.4g}  [{finite.min():.4g}, {finite.max():.4g}]"
    flags = [word for word, found in (("NaN", np.isnan(data).any()), ("Inf", np.isinf(data).any()),
                                      ("no variance", data.size > 1 and finite.size > 0 and
                                       finite.std() < LOW_VARIANCE)) if found]
    return text + (f"  ⚠ {', '.join(flags)}" if flags else "")

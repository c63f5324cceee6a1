"""Pictures of datapoints (the table's thumbnails, the gallery's tiles): which debug outputs can be drawn over the
input image, and the pixels drawn, checked against a blend computed here; on a real tiny run, the thumbnail is the
captured input and a tile is its Grad-CAM over it."""

from __future__ import annotations

import io
import shutil

import numpy as np
import PIL.Image
import plotly.colors
import pytest

from debuggers.pages.reader import DebugOutputs
from runners.eval_viewer.figures.overlays import MASK_OPACITY, OPACITY, find_overlay, overlay_choices, picture_png
from runners.eval_viewer.pictures.thumbnails import PictureUnavailable, Thumbnails, has_pictures, overlay_names
from runners.eval_viewer.shared.backend import ViewerBackend
from tests.e2e.conftest import DEBUGGER
from tests.runs import train, write_config

RNG = np.random.default_rng(0)


def decoded(png: bytes) -> np.ndarray:
    return np.asarray(PIL.Image.open(io.BytesIO(png)).convert("RGB")).astype(np.float64)


def by_hand(image: np.ndarray) -> np.ndarray:
    """An image in [0, 1]-ish as the viewer shows it: min-max stretched to 0..255."""
    return np.round((image - image.min()) / (image.max() - image.min()) * 255)


def jet(values: np.ndarray, low: float, high: float) -> np.ndarray:
    """plotly's Jet colour of each value, sampled by plotly itself."""
    shares = np.clip((values - low) / (high - low), 0, 1).reshape(-1)
    colours = plotly.colors.sample_colorscale("Jet", shares.tolist())
    return np.array([plotly.colors.unlabel_rgb(c) for c in colours], dtype=np.float64).reshape(*values.shape, 3)


def test_a_cam_is_drawn_over_the_image_in_jet_at_the_viewer_s_opacity():
    image, cam = RNG.random((8, 8, 3)), RNG.random((4, 4))
    outputs = {"gradcam": {"kind": "cam", "cam": cam, "target_class": 1}, "stats": {"kind": "statistics"}}
    assert overlay_choices(outputs) == ["gradcam"]
    drawn = decoded(picture_png(image, find_overlay(outputs, "gradcam"), 64))
    heat = jet(np.repeat(np.repeat(cam, 2, axis=0), 2, axis=1), 0.0, 1.0)  # each cam cell covers 2 x 2 pixels
    np.testing.assert_allclose(drawn, np.round(by_hand(image) * (1 - OPACITY) + heat * OPACITY), atol=1)


def test_a_captured_mask_tints_only_where_it_is_set_and_maps_take_their_own_range():
    image = RNG.random((6, 6))
    mask = (RNG.random((6, 6)) > 0.5).astype(np.uint8)
    energy = RNG.normal(size=(3, 6, 6)).astype(np.float32)
    outputs = {"cap": {"kind": "captured_states", "states": {"decoder": {
        "mask": {"kind": "tensor", "data": mask}, "energy": {"kind": "tensor", "data": energy},
        "tokens": {"kind": "embedding", "data": RNG.random(5)}}}}}
    assert overlay_choices(outputs) == ["cap › decoder.mask", "cap › decoder.energy"]
    plain = by_hand(np.repeat(image[..., None], 3, axis=2))
    tinted = decoded(picture_png(image, find_overlay(outputs, "cap › decoder.mask"), 64))
    magenta = np.array([255.0, 0.0, 255.0])
    expected = np.where(mask[..., None] == 1, np.round(plain * (1 - MASK_OPACITY) + magenta * MASK_OPACITY), plain)
    np.testing.assert_allclose(tinted, expected, atol=1)
    mean = energy.astype(np.float64).mean(axis=0)
    heat = decoded(picture_png(image, find_overlay(outputs, "cap › decoder.energy"), 64))
    np.testing.assert_allclose(heat, np.round(plain * (1 - OPACITY) + jet(mean, mean.min(), mean.max()) * OPACITY),
                               atol=1)


def test_a_segmentation_debugger_s_masks_tint_where_any_prompt_s_mask_is_set():
    image = RNG.random((6, 6, 3))
    predicted = (RNG.random((2, 6, 6)) > 0.6).astype(np.uint8)  # two prompts' masks
    label = np.full((1, 6, 6), 255, np.uint8)  # a class-index map, every pixel ignored but two
    label[0, :2, :2] = 3
    outputs = {"seg": {"kind": "mask", "predicted_mask": predicted, "label_mask": label}}
    assert overlay_choices(outputs) == ["seg › predicted mask", "seg › label mask"]
    either = predicted.max(axis=0)
    plain = by_hand(image)
    expected = np.where(either[..., None] == 1, np.round(plain * (1 - MASK_OPACITY) + np.array([255.0, 0, 255.0])
                                                          * MASK_OPACITY), plain)
    np.testing.assert_allclose(decoded(picture_png(image, find_overlay(outputs, "seg › predicted mask"), 64)),
                               expected, atol=1)
    drawn = decoded(picture_png(image, find_overlay(outputs, "seg › label mask"), 64))
    np.testing.assert_allclose(drawn[2:, 2:], plain[2:, 2:], atol=1)  # ignored pixels keep the image
    assert not np.allclose(drawn[:2, :2], plain[:2, :2], atol=1)


def test_patch_attention_and_feature_maps_offer_overlays_and_odd_outputs_offer_none():
    attention = RNG.dirichlet(np.ones(5), size=(2, 5))  # CLS + 2 x 2 patches
    outputs = {"attn": {"kind": "attention", "attention": attention, "grid": None},
               "fm": {"kind": "feature_map", "feature_map": RNG.random((4, 3, 3))},
               "custom": {"energy": RNG.random(4)}, "crafted": {"kind": "cam", "cam": "not an array"},
               "crafted_states": {"kind": "captured_states", "states": ["not", "a", "dict"]},
               "crafted_state": {"kind": "captured_states", "states": {"decoder": 7}},
               "error": {"kind": "error", "message": "boom"}}
    assert overlay_choices(outputs) == ["attn", "fm"]
    np.testing.assert_allclose(find_overlay(outputs, "attn").values, attention[:, 0, 1:].mean(axis=0).reshape(2, 2))
    for hostile in ("<img src=x onerror=alert(1)>", "crafted", "attn' OR 1=1 --", None, ["attn"], 7):
        assert find_overlay(outputs, hostile) is None


def test_a_large_picture_is_shrunk_to_the_side_asked_and_a_small_one_kept():
    assert PIL.Image.open(io.BytesIO(picture_png(RNG.random((300, 200, 3)), None, 48))).size == (32, 48)
    assert PIL.Image.open(io.BytesIO(picture_png(RNG.random((16, 16, 3)), None, 48))).size == (16, 16)
    with pytest.raises(ValueError, match="nothing to draw"):
        picture_png(None, None, 48)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("pictures")
    (root / "configs").mkdir()
    return train(write_config(root / "configs" / "run.py", root / "logs" / "run", epochs=1, val_size=8,
                              extra=DEBUGGER))


def test_the_thumbnail_is_the_captured_input_and_a_tile_its_grad_cam(run, tmp_path):
    backend = ViewerBackend([run])
    found = backend.run(run)
    epoch = backend.epoch(found, "epoch_0")
    thumbnails = Thumbnails(backend)
    captured = DebugOutputs(f"{run}/datapoints")[5]["inputs"]["image"]  # (3, 16, 16), read here on its own
    image = np.transpose(np.asarray(captured, dtype=np.float64), (1, 2, 0))
    np.testing.assert_allclose(decoded(thumbnails.thumbnail(found, 5)), by_hand(image), atol=1)
    assert has_pictures(backend, found) and overlay_names(backend, epoch) == ["gradcam"]
    cam = DebugOutputs(f"{run}/epoch_0/debugger")[5]["gradcam"]["cam"]
    scale = 16 // cam.shape[0]
    heat = jet(np.repeat(np.repeat(np.asarray(cam, np.float64), scale, axis=0), scale, axis=1), 0.0, 1.0)
    np.testing.assert_allclose(decoded(thumbnails.tile(found, epoch, 5, "gradcam")),
                               np.round(by_hand(image) * (1 - OPACITY) + heat * OPACITY), atol=1)
    with pytest.raises(PictureUnavailable, match="has no output 'layer3_energy' to draw over its image.*gradcam"):
        thumbnails.tile(found, epoch, 5, "layer3_energy")
    with pytest.raises(PictureUnavailable, match="inputs of datapoint 99 were not captured"):
        thumbnails.thumbnail(found, 99)

    moved = shutil.copytree(run, tmp_path / "logs" / "without")
    shutil.rmtree(moved / "datapoints")
    backend = ViewerBackend([str(moved)])
    assert not has_pictures(backend, backend.run(str(moved)))

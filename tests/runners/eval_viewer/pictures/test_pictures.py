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
from runners.eval_viewer.figures.marks import FALSE_NEGATIVE, FALSE_POSITIVE, MARK_PX, RING, VIVID
from runners.eval_viewer.figures.overlays import OPACITY, find_overlay, overlay_choices, picture_png
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


def enlarged(pixels: np.ndarray, factor: int) -> np.ndarray:
    """Each pixel as a ``factor`` x ``factor`` block (how a marked picture enlarges a small image)."""
    return np.repeat(np.repeat(pixels, factor, axis=0), factor, axis=1)


def around(mask: np.ndarray) -> np.ndarray:
    """The mask and the pixels next to it (where its halo is drawn)."""
    padded = np.pad(mask, 1)
    return mask | padded[:-2, 1:-1] | padded[2:, 1:-1] | padded[1:-1, :-2] | padded[1:-1, 2:]


def test_a_captured_mask_stands_out_on_an_image_of_its_old_tint_and_maps_take_their_own_range():
    """a magenta tint vanished on magenta scenes: the mask now takes the vivid colour farthest from the image under
    it, with an edge and a halo, and leaves the rest of the image as it is."""
    image = np.stack([np.full((8, 8), 0.9), RNG.random((8, 8)) * 0.1, np.full((8, 8), 0.85)], axis=-1)  # magenta
    mask = np.zeros((8, 8), np.uint8)
    mask[2:6, 1:5] = 1
    energy = RNG.normal(size=(3, 8, 8)).astype(np.float32)
    outputs = {"cap": {"kind": "captured_states", "states": {"decoder": {
        "mask": {"kind": "tensor", "data": mask}, "energy": {"kind": "tensor", "data": energy},
        "tokens": {"kind": "embedding", "data": RNG.random(5)}}}}}
    assert overlay_choices(outputs) == ["cap › decoder.mask", "cap › decoder.energy"]
    plain = by_hand(image)
    drawn = decoded(picture_png(image, find_overlay(outputs, "cap › decoder.mask"), 256))
    factor = MARK_PX // 8
    assert drawn.shape == (MARK_PX, MARK_PX, 3)
    big, big_plain = enlarged(mask, factor).astype(bool), enlarged(plain, factor)
    np.testing.assert_allclose(drawn[~around(big)], big_plain[~around(big)], atol=1)  # the rest as it was
    edge = drawn[2 * factor, 1 * factor + factor // 2]  # on the mask's top edge
    assert tuple(edge) in set(VIVID.values()) and tuple(edge) != VIVID["magenta"]
    assert np.linalg.norm(drawn[big] - big_plain[big], axis=1).min() > 60  # every mask pixel visibly changed
    mean = energy.astype(np.float64).mean(axis=0)
    heat = decoded(picture_png(image, find_overlay(outputs, "cap › decoder.energy"), 64))
    np.testing.assert_allclose(heat, np.round(plain * (1 - OPACITY) + jet(mean, mean.min(), mean.max()) * OPACITY),
                               atol=1)


def test_a_segmentation_debugger_offers_its_errors_and_masks_and_the_prompt_is_ringed():
    image = RNG.random((8, 8, 3)) * 0.5
    label, predicted = np.zeros((1, 8, 8), np.uint8), np.zeros((1, 8, 8), np.uint8)
    label[0, 1:5, 1:5], predicted[0, 3:7, 3:7] = 1, 1
    outputs = {"seg": {"kind": "mask", "predicted_mask": predicted, "label_mask": label}}
    assert overlay_choices(outputs) == ["seg › errors", "seg › predicted mask", "seg › label mask"]
    errors = find_overlay(outputs, "seg › errors").values
    false_positive, false_negative = (predicted[0] == 1) & (label[0] == 0), (label[0] == 1) & (predicted[0] == 0)
    np.testing.assert_array_equal(errors, np.where(false_positive, 1, np.where(false_negative, 2, 0)))
    drawn = decoded(picture_png(image, find_overlay(outputs, "seg › errors"), 256, points=np.array([[2.5, 2.5]])))
    factor = MARK_PX // 8
    assert tuple(drawn[6 * factor + factor // 2, 7 * factor - 1]) == FALSE_POSITIVE  # the edge of (6, 6), an FP
    assert tuple(drawn[1 * factor + factor // 2, 1 * factor]) == FALSE_NEGATIVE  # the edge of (1, 1), an FN
    right = ~around(enlarged(false_positive | false_negative, factor))
    right[:5 * factor, :5 * factor] = False  # the ring's corner
    np.testing.assert_allclose(drawn[right], enlarged(by_hand(image), factor)[right], atol=1)
    centre, radius = 2.5 * factor, RING * MARK_PX
    assert tuple(drawn[int(centre), int(centre + radius)]) == (255, 255, 255)  # on the ring: white
    assert tuple(drawn[int(centre), int(centre + radius + 1.8)]) == (0, 0, 0)  # its dark edge

    two = (RNG.random((2, 6, 6)) > 0.6).astype(np.uint8)  # two prompts' masks, against an ignored class-index map
    shaped = {"seg": {"kind": "mask", "predicted_mask": two, "label_mask": np.full((1, 6, 6), 255, np.uint8)}}
    assert overlay_choices(shaped) == ["seg › predicted mask", "seg › label mask"]  # shapes differ: no errors
    np.testing.assert_array_equal(find_overlay(shaped, "seg › predicted mask").values, two.max(axis=0))


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

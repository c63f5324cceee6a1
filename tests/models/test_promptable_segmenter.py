"""The SAM2-shaped segmenters: shapes, the sine encoding's maths, the guide's states at the capture points (read back
from real pages, batched equal to alone), the video model's memory."""

import math

import numpy as np
import torch

from data.datasets.prompted_clips import PromptedClipsDataset
from data.datasets.prompted_masks import collate_prompted_clips, collate_prompted_masks
from data.datasets.prompted_shapes import PromptedShapesDataset
from debuggers.capture_debugger import CaptureDebugger
from debuggers.frame_capture_debugger import FrameCaptureDebugger
from models.promptable_segmenter import PositionEmbeddingRandom, PositionEmbeddingSine, PromptableSegmenter
from models.promptable_video_segmenter import PromptableVideoSegmenter
from tests.compat.harness import assert_same_outputs
from tests.debuggers.library import entry, run_batches

GUIDE_STATES = {
    "image_encoder": {"input_image", "trunk_features_level_0", "fpn_features_level_0", "vision_features_final",
                      "position_encoding_level_1"},
    "position_encoding_sine": {"coordinate_grids_x", "coordinate_grids_y", "coordinate_grids_x_normalized",
                               "frequency_dimensions", "sinusoidal_encoding_x", "position_embeddings_final"},
    "two_way_transformer_layer_0": {"attention_weights", "attention_scores", "multihead_queries", "multihead_keys",
                                    "multihead_values"},
    "two_way_transformer_layer_1": {"attention_weights"},
    "sam_mask_decoder": {"input_image_embeddings", "input_sparse_prompt_embeddings", "raw_masks_output",
                         "iou_predictions", "hypernetwork_output_0", "hypernetwork_output_1",
                         "upscaled_embedding_final"},
}


def scene_batches(count=6, size=3):
    dataset = PromptedShapesDataset(count, split="val")
    return [collate_prompted_masks([dataset[i] for i in range(start, min(start + size, count))])
            for start in range(0, count, size)]


def singles(batches):
    return [collate_prompted_masks([{"inputs": {k: v[row] for k, v in batch["inputs"].items()},
                                     "labels": {"mask": batch["labels"]["mask"][row]},
                                     "meta_info": {"idx": int(batch["meta_info"]["idx"][row])}}])
            for batch in batches for row in range(len(batch["meta_info"]["idx"]))]


def test_outputs_and_several_masks():
    torch.manual_seed(0)
    model = PromptableSegmenter(num_masks=3).eval()
    outputs = model({"image": torch.randn(2, 3, 32, 32), "point": torch.tensor([[3.0, 4.0], [20.0, 30.0]])})
    assert outputs["masks"].shape == (2, 1, 32, 32) and outputs["iou_predictions"].shape == (2,)
    assert outputs["all_masks"].shape == (2, 3, 32, 32)
    best = outputs["all_iou_predictions"].argmax(dim=1)
    for b in range(2):  # the returned mask is the one with the highest predicted IoU
        assert torch.equal(outputs["masks"][b, 0], outputs["all_masks"][b, best[b]])
        assert outputs["iou_predictions"][b] == outputs["all_iou_predictions"][b].max()


def test_sine_encoding_matches_its_formula():
    encoding = PositionEmbeddingSine(8, temperature=100.0)((3, 4), torch.device("cpu"))
    assert encoding.shape == (8, 3, 4)
    row, col = 2, 1
    y, x = (row + 1) / 3 * 2 * math.pi, (col + 1) / 4 * 2 * math.pi
    frequencies = [100.0 ** (2 * (k // 2) / 4) for k in range(4)]
    expected = [math.sin(y / f) if k % 2 == 0 else math.cos(y / f) for k, f in enumerate(frequencies)]
    expected += [math.sin(x / f) if k % 2 == 0 else math.cos(x / f) for k, f in enumerate(frequencies)]
    np.testing.assert_allclose(encoding[:, row, col].numpy(), expected, rtol=1e-5, atol=1e-6)


def test_random_encoding_matches_its_formula_and_a_prompt_at_a_cells_centre_matches_the_cell():
    torch.manual_seed(0)
    layer = PositionEmbeddingRandom(8, scale=0.5)
    encoding = layer((3, 4), torch.device("cpu"))
    assert encoding.shape == (8, 3, 4)
    row, col = 2, 1
    g = layer.gaussian_matrix.numpy()
    angles = 2 * math.pi * ((2 * (col + 0.5) / 4 - 1) * g[0] + (2 * (row + 0.5) / 3 - 1) * g[1])
    np.testing.assert_allclose(encoding[:, row, col].numpy(), np.concatenate([np.sin(angles), np.cos(angles)]),
                               rtol=1e-5, atol=1e-6)
    # a point (x, y) in pixels of a 12x16 image at the centre of cell (2, 1) of the 3x4 grid (pixel centres: +0.5)
    point = torch.tensor([[[(col + 0.5) * 4 - 0.5, (row + 0.5) * 4 - 0.5]]])
    np.testing.assert_allclose(layer.points(point, (12, 16))[0, 0].numpy(), encoding[:, row, col].numpy(),
                               rtol=1e-5, atol=1e-6)


def test_the_guide_states_are_offered_and_split_per_datapoint(tmp_path):
    torch.manual_seed(0)
    model = PromptableSegmenter(num_masks=2).eval()
    batches = scene_batches()
    debuggers = [entry("states", CaptureDebugger)]
    _, batched = run_batches(model, batches, tmp_path / "batched", debuggers, strict=True)
    states = batched[4]["states"]["states"]
    for component, names in GUIDE_STATES.items():
        assert names <= set(states[component]), (component, sorted(states[component]))
    attention = states["two_way_transformer_layer_1"]["attention_weights"]
    assert attention["data"].shape == (4, 4, 64)  # heads, tokens (iou, 2 masks, prompt), the 8x8 image grid
    assert attention["metadata"] == {"grid": [8, 8], "query_tokens": ["iou", "mask_0", "mask_1", "prompt_0"]}
    np.testing.assert_allclose(attention["data"].sum(axis=-1), 1.0, rtol=1e-5)
    assert states["position_encoding_sine"]["position_embeddings_final"]["shared"]
    with torch.no_grad():  # the states are the model's own: the raw masks upsampled are the output masks
        output = model(singles(batches)[4]["inputs"])
    raw = torch.from_numpy(states["sam_mask_decoder"]["raw_masks_output"]["data"])[None]
    predicted = torch.from_numpy(states["sam_mask_decoder"]["iou_predictions"]["data"])
    upsampled = torch.nn.functional.interpolate(raw, size=(32, 32), mode="bilinear", align_corners=False)
    np.testing.assert_allclose(upsampled[0, predicted.argmax()].numpy(), output["masks"][0, 0].numpy(), atol=1e-4)
    _, alone = run_batches(model, singles(batches), tmp_path / "alone", debuggers, strict=True)
    assert_same_outputs(batched, alone, atol=1e-4)


def test_the_video_model_keeps_the_prompted_frame_and_the_latest_in_memory(tmp_path):
    torch.manual_seed(0)
    model = PromptableVideoSegmenter(num_memory_frames=3).eval()
    dataset = PromptedClipsDataset(4, num_frames=6, split="val")
    batch = collate_prompted_clips([dataset[i] for i in range(4)])
    debuggers = [entry("frames", FrameCaptureDebugger, every_n_frames=1, max_frames=6, max_mb_per_datapoint=50,
                       states=["attention_weights"], components=["memory_attention"])]
    _, outputs = run_batches(model, [batch], tmp_path, debuggers, strict=True)
    with torch.no_grad():
        direct = model(batch["inputs"])
    assert direct["masks"].shape == (4, 6, 1, 32, 32) and direct["iou_predictions"].shape == (4, 6)
    states = outputs[2]["frames"]["states"]
    assert sorted(states) == [f"memory_attention_frame_{t}" for t in range(1, 6)]  # frame 0 has no memory
    memories = {t: states[f"memory_attention_frame_{t}"]["attention_weights"]["metadata"]["memory_frames"]
                for t in range(1, 6)}
    assert memories == {1: [0], 2: [0, 1], 3: [0, 1, 2], 4: [0, 2, 3], 5: [0, 3, 4]}
    weights = states["memory_attention_frame_5"]["attention_weights"]["data"]
    assert weights.shape == (4, 64, 3 * 64)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5)

"""The SAM2 guide's debug API in the guide's own usage (``sam2_debug_visualization_guide.md``): its snippets as
written, on a small model whose components are named as SAM2's, with ``from sam2.debug_utils import ...`` read
as ``from data.viewer.debug_utils import ...`` (Lantern's module of the same names)."""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
import sys
import textwrap
import types
from typing import Optional

import matplotlib
import numpy as np
import plotly.graph_objects as go
import pytest
import torch
import torch.nn as nn

from criteria.mask_criterion import PromptedMaskCriterion
from data.datasets.prompted_masks import collate_prompted_masks
from data.datasets.prompted_shapes import MEAN, STD, PromptedShapesDataset
from data.viewer.debug_utils import (
    DebugStateCapture,
    capture_debug_state,
    clear_debug_states,
    disable_debug_mode,
    enable_debug_mode,
    get_debug_states,
    is_debug_enabled,
    visualize_debug_states,
)
from debuggers.capture import listen
from models.promptable_segmenter import PromptableSegmenter
from models.promptable_video_segmenter import PromptableVideoSegmenter
from tests.seeds.seedproj import sam2_reader
from tests.seeds.test_debugger_examples import seed_file

pytestmark = pytest.mark.slow  # runs the guide's whole model: runs in .ci/run's second command (README: the slow tests)

matplotlib.use("Agg")


class TwoWayLayer(nn.Module):
    """Attention between prompt tokens and image tokens, offering its states under SAM2's names."""

    def __init__(self, index: int, dim: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.name, self.heads = f"two_way_transformer_layer_{index}", heads
        self.query, self.key = nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, prompts: torch.Tensor, image_tokens: torch.Tensor) -> torch.Tensor:
        b, n, d = prompts.shape
        q = self.query(prompts).view(b, n, self.heads, -1).transpose(1, 2)
        k = self.key(image_tokens).view(b, image_tokens.shape[1], self.heads, -1).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        weights = scores.softmax(dim=-1)
        if is_debug_enabled():
            capture_debug_state(self.name, "attention_scores", scores)
            capture_debug_state(self.name, "attention_weights", weights, {"grid": (4, 4)})
        return prompts + (weights @ image_tokens.view(b, -1, self.heads, d // self.heads).transpose(1, 2)
                          ).transpose(1, 2).reshape(b, n, d)


class TinySAM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Conv2d(3, 8, 4, stride=4)
        self.layers = nn.ModuleList([TwoWayLayer(0), TwoWayLayer(1)])
        self.decoder = nn.Linear(8, 1)

    def forward(self, images: torch.Tensor, prompts: torch.Tensor) -> torch.Tensor:
        features = self.encoder(images)  # (B, 8, 4, 4)
        position = torch.linspace(-1, 1, 16).repeat(8, 1).T  # (16, 8): no batch
        capture_debug_state("image_encoder", "vision_features_final", features)
        capture_debug_state("position_encoding_sine", "position_embeddings_final", position, {"batch_dim": None})
        tokens = features.flatten(2).transpose(1, 2) + position
        for layer in self.layers:
            prompts = layer(prompts, tokens)
        return self.decoder(prompts).squeeze(-1)  # (B, prompts)


@pytest.fixture
def model():
    torch.manual_seed(0)
    yield TinySAM().eval()
    disable_debug_mode()
    clear_debug_states()


def run(model, batch=1):
    torch.manual_seed(1)
    return model(torch.randn(batch, 3, 16, 16), torch.randn(batch, 3, 8))


def test_quick_start_to_advanced_usage(model, tmp_path):
    # Advanced Usage with Selective Visualization, as written (the predictor replaced by the model's forward)
    enable_debug_mode(
        capture_attention=True,
        capture_embeddings=True,
        capture_position_encoding=True,
        capture_gradients=False  # Disable gradient capture for faster inference
    )
    for i in range(2):
        clear_debug_states()  # Clear previous states
        run(model)
        debug_states = get_debug_states()
        for component_name, states in debug_states.items():
            for state_name, state_info in states.items():
                if 'attention_weights' in state_name:
                    assert state_info['data'].shape == (1, 2, 3, 16)
    disable_debug_mode()
    assert set(debug_states) == {"image_encoder", "position_encoding_sine", "two_way_transformer_layer_0",
                                 "two_way_transformer_layer_1"}
    weights = debug_states["two_way_transformer_layer_1"]["attention_weights"]
    assert weights["metadata"] == {"grid": (4, 4)}
    torch.testing.assert_close(weights["data"].sum(-1), torch.ones(1, 2, 3))
    assert not is_debug_enabled()
    run(model)
    assert get_debug_states() is debug_states  # disabled: nothing new is kept


def test_selective_capture_leaves_out_the_families_switched_off(model):
    # Best Practices, 1. Selective Debug Capture, "For attention analysis", as written
    enable_debug_mode(
        capture_attention=True,
        capture_embeddings=False,
        capture_position_encoding=False
    )
    run(model)
    assert {state for states in get_debug_states().values() for state in states} == {
        "attention_scores", "attention_weights", "vision_features_final"}  # no 'embedding' nor 'position' in it


def test_custom_debug_hooks_with_the_guides_keyword_arguments(model):
    # Extending the Debug System, Adding Custom Debug Hooks, as written (self.process given)
    class CustomModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.process = nn.Linear(4, 4)

        def forward(self, x, debug_name=None):
            # Your computation
            output = self.process(x)

            # Add debug capture
            if debug_name and is_debug_enabled():
                capture_debug_state(
                    component_name=debug_name,
                    state_name="custom_output",
                    data=output,
                    metadata={'custom_info': 'example'}
                )

            return output

    module = CustomModule()
    x = torch.randn(2, 4)
    module(x, debug_name="custom")
    assert get_debug_states() == {}  # debug mode off: the capture point costs one check
    enable_debug_mode()
    output = module(x, debug_name="custom")
    record = get_debug_states()["custom"]["custom_output"]
    torch.testing.assert_close(record["data"], output.detach())
    assert record["metadata"] == {"custom_info": "example"} and not record["data"].requires_grad
    output.mul_(0)  # a later in-place change does not reach the kept copy
    assert record["data"].abs().sum() > 0


def test_gradients_of_a_captured_state_when_backward_runs(model):
    # Integration with Training, as written where it runs (one batch, the model's own loss)
    enable_debug_mode(capture_gradients=True)
    clear_debug_states()
    images, prompts = torch.randn(2, 3, 16, 16), torch.randn(2, 3, 8)
    with torch.enable_grad():
        outputs = model.train()(images, prompts)
        loss = outputs.pow(2).sum()
        before = get_debug_states()["two_way_transformer_layer_0"]["attention_weights"]["gradient"]
        loss.backward()
    debug_states = get_debug_states()
    gradient = debug_states["two_way_transformer_layer_0"]["attention_weights"]["gradient"]
    assert before is None and gradient.shape == (2, 2, 3, 16)
    # independently: the live tensor offered at the capture point, and autograd.grad of the same loss
    disable_debug_mode()
    offered = {}
    with listen(lambda component, state, data, metadata: offered.setdefault((component, state), data),
                debug_mode=True):  # a listener that keeps what it hears: TinySAM's guarded capture points offer
        with torch.enable_grad():
            again = model(images, prompts).pow(2).sum()
            expected, = torch.autograd.grad(again, offered[("two_way_transformer_layer_0", "attention_weights")])
    torch.testing.assert_close(gradient, expected)
    assert "gradient" in debug_states["image_encoder"]["vision_features_final"]


def test_state_analysis_and_troubleshooting_run_as_written(model):
    enable_debug_mode()
    run(model)
    debug_states = get_debug_states()

    # State Analysis, as written
    def analyze_debug_states(debug_states):
        """Analyze captured debug states for potential issues."""

        for component_name, component_states in debug_states.items():
            print(f"\n=== {component_name} ===")

            for state_name, state_info in component_states.items():
                data = state_info['data']
                metadata = state_info.get('metadata', {})

                if isinstance(data, torch.Tensor):
                    print(f"{state_name}:")
                    print(f"  Shape: {data.shape}")
                    print(f"  Range: [{data.min().item():.6f}, {data.max().item():.6f}]")
                    print(f"  Mean: {data.mean().item():.6f}")
                    print(f"  Std: {data.std().item():.6f}")

                    # Check for potential issues
                    if torch.isnan(data).any():
                        print("  ⚠️  Contains NaN values!")
                    if torch.isinf(data).any():
                        print("  ⚠️  Contains infinite values!")
                    if data.std() < 1e-6:
                        print("  ⚠️  Very low variance - potential dead neurons!")

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        analyze_debug_states(debug_states)
        # Troubleshooting, 1. No debug states captured, and 3. Visualization errors, as written
        print(f"Debug enabled: {is_debug_enabled()}")
        for component_name, states in debug_states.items():
            for state_name, state_info in states.items():
                data = state_info['data']
                print(f"{component_name}.{state_name}: {data.shape}, {data.dtype}")
    text = printed.getvalue()
    assert "=== two_way_transformer_layer_1 ===" in text and "Shape: torch.Size([1, 8, 4, 4])" in text
    assert "Debug enabled: True" in text
    assert "position_encoding_sine.position_embeddings_final: torch.Size([16, 8]), torch.float32" in text


def test_visualize_debug_states_with_a_summary(model, tmp_path):
    enable_debug_mode()
    run(model, batch=2)
    debug_states = get_debug_states()
    # Memory and Performance Optimization, as written (frame_idx given)
    frame_idx = 0
    visualize_debug_states(
        debug_states,
        save_path=str(tmp_path / f"debug_output/frame_{frame_idx}/"),
        create_summary=True
    )
    page = (tmp_path / "debug_output" / "frame_0" / "debug_states.html").read_text()
    assert "summary: 6 array(s)" in page and "two_way_transformer_layer_0.attention_weights" in page
    figures = visualize_debug_states(debug_states, create_summary=True, datapoint=1)
    assert isinstance(figures[0].data[0], go.Table)
    rows = dict(zip(figures[0].data[0].cells.values[0], figures[0].data[0].cells.values[1]))
    assert rows["debug states.two_way_transformer_layer_0.attention_weights"] == "(2, 3, 16)"  # datapoint 1 of 2
    assert rows["debug states.position_encoding_sine.position_embeddings_final"] == "(16, 8)"  # no batch: whole
    mean = float(figures[0].data[0].cells.values[5][list(rows).index(
        "debug states.image_encoder.vision_features_final")])
    assert mean == pytest.approx(float(debug_states["image_encoder"]["vision_features_final"]["data"][1].mean()),
                                 rel=1e-3)
    titles = [f.layout.title.text for f in figures[1:]]
    # the guide's components are drawn by runners/eval_viewer/figures/sam2.py: the prompt's attention per
    # head and layer in one figure
    attention = next(f for f in figures[1:] if "cross-attention, per head (columns) and layer (rows)"
                     in f.layout.title.text)
    assert {"layer 0", "layer 1"} <= {a.text for a in attention.layout.annotations}, titles
    assert len(visualize_debug_states(debug_states)) == len(figures) - 1


def test_a_capture_of_ones_own_with_the_guides_switches(model):
    # Memory and Performance Optimization: DebugStateCapture, as written
    debug_capture = DebugStateCapture()
    debug_capture.enable(
        capture_attention=True,
        capture_embeddings=False,  # Disable to save memory
        capture_position_encoding=True,
        capture_gradients=False
    )
    run(model)
    assert "position_encoding_sine" in debug_capture.states and get_debug_states() == {}
    debug_capture.clear()  # Clear previous states
    assert debug_capture.states == {}
    debug_capture.disable()
    assert not is_debug_enabled()


def test_the_guides_attention_evolution_figure_reads_the_kept_states(model, tmp_path):
    """Custom Visualizations: the guide's matplotlib function on what get_debug_states() keeps, as written."""
    import matplotlib.pyplot as plt

    enable_debug_mode()
    run(model, batch=2)
    debug_states = get_debug_states()

    def visualize_attention_evolution(debug_states, save_path=None):
        """Visualize how attention patterns evolve across transformer layers."""

        fig, axes = plt.subplots(2, 3, figsize=(18, 12))
        axes = axes.flatten()

        layer_names = [name for name in debug_states.keys() if 'two_way_transformer_layer' in name]

        for i, layer_name in enumerate(layer_names[:6]):
            if 'attention_weights' in debug_states[layer_name]:
                attn_weights = debug_states[layer_name]['attention_weights']['data']
                # Average across heads and batch
                attn_avg = attn_weights.mean(dim=(0, 1)).numpy()

                im = axes[i].imshow(attn_avg, cmap='viridis')
                axes[i].set_title(f'{layer_name}')
                axes[i].axis('off')
                plt.colorbar(im, ax=axes[i], fraction=0.046)

        # Turn off unused axes
        for i in range(len(layer_names), len(axes)):
            axes[i].axis('off')

        plt.tight_layout()
        if save_path:
            plt.savefig(f"{save_path}/attention_evolution.png", dpi=300, bbox_inches='tight')
        plt.show()

    visualize_attention_evolution(debug_states, save_path=str(tmp_path))
    plt.close("all")
    assert (tmp_path / "attention_evolution.png").stat().st_size > 0
    average = debug_states["two_way_transformer_layer_0"]["attention_weights"]["data"].mean(dim=(0, 1)).numpy()
    np.testing.assert_allclose(average.sum(-1), 1, rtol=1e-5)


class LearnedPosition(nn.Module):
    """A learned position embedding (an nn.Parameter, as ViT's pos_embed) offered at a capture point every forward."""

    def __init__(self) -> None:
        super().__init__()
        self.pos_embed = nn.Parameter(torch.randn(4, 8))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        capture_debug_state("image_encoder", "position_embeddings_final", self.pos_embed)
        return tokens + self.pos_embed


@pytest.mark.parametrize("clear_each_batch", [True, False])
def test_gradients_of_a_captured_parameter_leave_one_hook_on_it_whatever_the_number_of_batches(clear_each_batch):
    """A parameter lives for the whole run: a gradient hook put on it at every capture stays, and every backward
    then ran one hook (and kept one gradient copy) per batch seen so far."""
    torch.manual_seed(0)
    module = LearnedPosition()
    enable_debug_mode(capture_gradients=True)
    try:
        for _ in range(5):
            if clear_each_batch:
                clear_debug_states()
            module.zero_grad()
            module(torch.randn(2, 4, 8)).pow(2).sum().backward()
        record = get_debug_states()["image_encoder"]["position_embeddings_final"]
        torch.testing.assert_close(record["gradient"], module.pos_embed.grad)
        assert len(module.pos_embed._backward_hooks or {}) <= 1
        clear_debug_states()
        assert not module.pos_embed._backward_hooks  # nothing of the session stays on the model
    finally:
        disable_debug_mode()
        clear_debug_states()


def test_a_clip_keeps_every_frames_states_and_draws_its_memory_attention_over_the_frames():
    """A debug session over the video model keeps each frame's states under ``<component>_frame_<t>`` (not the last
    frame's only), each what the model offered during that frame, and ``visualize_debug_states`` draws the share of
    each frame's attention on each frame in its memory bank (the prompted one and the latest)."""
    torch.manual_seed(0)
    model = PromptableVideoSegmenter(num_memory_frames=3).eval()
    inputs = {"frames": torch.randn(2, 5, 3, 32, 32), "point": torch.tensor([[[10.0, 12.0]], [[3.0, 4.0]]])}
    heard = []  # the memory attention as offered, frame after frame
    with listen(lambda component, state, data, metadata: heard.append(data.clone()) if (
            component, state) == ("memory_attention", "attention_weights") else None):
        enable_debug_mode()
        try:
            with torch.no_grad():
                model(inputs)
        finally:
            disable_debug_mode()
    states = get_debug_states()
    assert {f"image_encoder_frame_{t}" for t in range(5)} <= set(states) and "image_encoder" not in states
    banks = {1: [0], 2: [0, 1], 3: [0, 1, 2], 4: [0, 2, 3]}  # the prompted frame and the latest, 3 at most
    for t, bank in banks.items():
        record = states[f"memory_attention_frame_{t}"]["attention_weights"]
        torch.testing.assert_close(record["data"], heard[t - 1])
        assert record["metadata"]["memory_frames"] == bank
    (shares,) = [f for f in visualize_debug_states(states, datapoint=1) if "share of each frame" in f.layout.title.text]
    for row, (t, bank) in enumerate(banks.items()):
        weights = heard[t - 1][1].numpy().mean(axis=(0, 1)).reshape(len(bank), -1).sum(axis=1)
        np.testing.assert_allclose(np.asarray(shares.data[0].z)[row, bank], weights, rtol=1e-5)
        assert np.isnan(np.asarray(shares.data[0].z)[row, [f for f in range(5) if f not in bank]]).all()
    with torch.no_grad():
        own = model(inputs, return_debug_states=True)["debug_states"]  # the forward's own states: the same frames
    assert set(own) == set(states) and not is_debug_enabled()


# ---------------------------------------------------------------- the guide's code blocks, one after the other
GUIDE = pathlib.Path(__file__).parent / "seedproj" / "sam2_debug_visualization_guide.md"
PART = re.compile(r"^(#{1,3}) ([^\n]*)$|^( *)```python\n(.*?)^\3```", re.DOTALL | re.MULTILINE)  # heading or code
RENAME = ("sam2.debug_utils", "data.viewer.debug_utils")  # the guide's module is Lantern's data.viewer.debug_utils
FILL_INS = {  # the guide's placeholders, as its reader fills them in
    "image = ... # Your input image (numpy array or PIL Image)": "image = reader_image",
    '"path/to/sam2_checkpoint.pt"': "reader_checkpoint",
}
QUICK_START = "Quick Start"
NOTEBOOK = "%matplotlib inline"  # the one block for a notebook only: IPython's magic, which a kernel runs, is no Python
NOTEBOOK_BLOCK = "# Notebook-friendly visualization"  # its first line


def guide_blocks() -> list[tuple[str, str, bool, str]]:
    """The guide's code blocks in its order: (its part, the heading of level 2, and its section, of level 2 or 3,
    it is in; whether it stands at the top level; its dedented code)."""
    blocks, part, section = [], "", ""
    for match in PART.finditer(GUIDE.read_text()):
        if match.group(1):
            section = match.group(2)
            part = section if len(match.group(1)) <= 2 else part
            continue
        indent, code = match.group(3), match.group(4)
        blocks.append((part, section, not indent,
                       textwrap.dedent("\n".join(line[len(indent):] for line in code.splitlines()))))
    return blocks


def test_the_project_holds_the_guide_character_for_character():
    path = seed_file("sam2_debug_visualization_guide.md")
    if path is None:
        pytest.skip("the seeds' sam2_debug_visualization_guide.md is not beside this checkout")
    assert GUIDE.read_text() == path.read_text()


def scene_image(dataset, idx: int) -> np.ndarray:
    """A scene as the reader's (H, W, 3) uint8 image."""
    image = dataset[idx]["inputs"]["image"].permute(1, 2, 0).numpy() * STD + MEAN
    return (np.clip(image, 0, 1) * 255).round().astype(np.uint8)


@pytest.fixture
def reader(tmp_path, monkeypatch):
    """The reader's session: their own sam2 package (build_sam2, a predictor: tests/seeds/seedproj/sam2_reader.py),
    a checkpoint of the example's model, 256-pixel scenes (the guide's point (100, 200) lies inside), a video,
    a training loop's parts; the working folder a fresh one (the guide writes debug_output/)."""
    sam2 = types.ModuleType("sam2")
    sam2.build_sam2 = sam2_reader.build_sam2
    sam2.sam2_image_predictor = sam2_reader
    monkeypatch.setitem(sys.modules, "sam2", sam2)
    monkeypatch.setitem(sys.modules, "sam2.sam2_image_predictor", sam2_reader)
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    checkpoint = str(tmp_path / "checkpoint.pt")
    torch.save({"model_state_dict": PromptableSegmenter(dim=32, num_heads=4, depth=2).state_dict()}, checkpoint)
    scenes = PromptedShapesDataset(12, resolution=256, split="val")
    points = [[float(v) for v in scenes[i]["inputs"]["point"]] for i in range(12)]
    small = PromptedShapesDataset(8, split="train")
    seen: dict[str, list] = {"gradient_flow": [], "activation_statistics": []}
    namespace = {
        "reader_image": scene_image(scenes, 0), "reader_checkpoint": checkpoint, "nn": nn,
        "dataset": [(scene_image(scenes, i), [points[i]]) for i in (1, 2)],
        "video_frames": [scene_image(scenes, i) for i in range(11)], "tracked_points": [[p] for p in points],
        "model": PromptableSegmenter(dim=32, num_heads=4, depth=2).train(), "num_epochs": 1, "log_interval": 1,
        "dataloader": [(batch["inputs"], batch["labels"]) for batch in (
            collate_prompted_masks([small[i] for i in range(start, start + 4)]) for start in (0, 4))],
        "criterion": PromptedMaskCriterion(),
        "analyze_gradient_flow": seen["gradient_flow"].append,
        "visualize_activation_statistics": seen["activation_statistics"].append,
        "batches": [0, 1], "batch_id": 0, "should_save_debug": True,
        "initial_points": [points[3]], "refined_points": [points[3], [points[3][0] + 2, points[3][1]]],
    }
    namespace["optimizer"] = torch.optim.SGD(namespace["model"].parameters(), lr=0.01)
    yield namespace, seen
    disable_debug_mode()
    clear_debug_states()
    import matplotlib.pyplot as plt

    plt.close("all")


def run_blocks(namespace: dict) -> tuple[list[tuple[bool, str, Optional[BaseException]]], dict]:
    """Every block of the guide, as a reader runs them (the notebook's less its magic line): the Quick Start's in its
    order, then each section's in its order, each section from what the Quick Start left (its predictor and debug
    states), with debug mode off and the modules, functions and classes imported or defined so far. Per block:
    whether it stands at the top level, its first line, and what it raised (None if it ran); and the names the
    Quick Start left."""
    ran, section, quick_start = [], None, None
    for part, heading, top_level, code in guide_blocks():
        code = code.replace(NOTEBOOK, "")
        if part != QUICK_START and heading != section:
            quick_start = dict(namespace) if quick_start is None else quick_start
            disable_debug_mode()
            clear_debug_states()
            namespace = {**quick_start, **{name: value for name, value in namespace.items()
                                           if isinstance(value, (types.ModuleType, types.FunctionType, type))}}
        section = heading
        code = code.replace(*RENAME)
        for placeholder, filled in FILL_INS.items():
            code = code.replace(placeholder, filled)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(code, f"guide: {code.splitlines()[0]}", "exec"), namespace)
            ran.append((top_level, code.splitlines()[0], None))
        except Exception as error:  # a block that fails is counted, and the next runs as the reader's would
            ran.append((top_level, code.splitlines()[0], error))
    return ran, quick_start


@pytest.mark.timeout(600)
def test_the_guides_blocks_run_with_the_module_renamed_and_a_predictor_of_ones_own(reader):
    namespace, seen = reader
    ran, quick_start = run_blocks(namespace)
    top = [(first, error) for top_level, first, error in ran if top_level]
    assert len(top) == 21 and [error for first, error in top if first == NOTEBOOK_BLOCK] == [None]  # runs in a kernel
    top = [(first, error) for first, error in top if first != NOTEBOOK_BLOCK]  # the 20 outside a notebook
    failed = [(first, repr(error)) for first, error in top if error is not None]
    assert len(top) - len(failed) >= 19, failed
    # the one the guide itself gets wrong: its second stage reads logits_stage1, which no block assigns
    assert failed == [("# For multi-stage processing", "NameError(\"name 'logits_stage1' is not defined\")")], failed
    assert all(error is None for top_level, _, error in ran if not top_level)  # Troubleshooting's four, too
    # what they drew and kept: Quick Start's page, the selective visualization's per sample, the video's key frames
    assert os.path.getsize("debug_output/debug_states.html") > 0
    for sample in (0, 1):
        pages = set(os.listdir(f"debug_output/sample_{sample}"))
        assert {"mask_decoder_states.html", "attention_two_way_transformer_layer_0_attention_weights.html",
                "attention_two_way_transformer_final_attention_weights.html"} <= pages, pages
    assert {"frame_0", "frame_10"} <= set(os.listdir("debug_output"))
    assert {"position_encoding_sine.html", "image_embeddings.html", "attention_evolution.png",
            "attention_two_way_transformer_layer_0.html"} <= set(os.listdir("debug_output"))
    # Integration with Training: the debug states of each batch, with the gradients of its backward pass
    assert len(seen["gradient_flow"]) == 2
    gradient = seen["gradient_flow"][0]["two_way_transformer_layer_0"]["attention_weights"]["gradient"]
    assert gradient is not None and gradient.shape == (4, 4, 3, 64)  # (batch, heads, tokens, the 8x8 grid)
    # the guide's own states, under its names: both position encodings, and the states of the predictor's forward
    states = quick_start["debug_states"]
    assert {"position_encoding_sine", "position_encoding_random", "image_encoder", "sam_mask_decoder",
            "two_way_transformer_layer_0"} <= set(states)
    assert states["position_encoding_random"]["position_embeddings_final"]["data"].shape == (32, 64, 64)

"""The SAM2 guide's debug API in the guide's own usage (``sam2_debug_visualization_guide.md``): its snippets as
written, on a small model whose components are named as SAM2's, with ``from sam2.debug_utils import ...`` read
as ``from data.viewer.debug_utils import ...`` (Lantern's module of the same names)."""

from __future__ import annotations

import contextlib
import io

import matplotlib
import numpy as np
import plotly.graph_objects as go
import pytest
import torch
import torch.nn as nn

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
    with listen(lambda component, state, data, metadata: offered.setdefault((component, state), data)):
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

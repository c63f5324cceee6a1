"""SignalCNN: (B, C, T) stages a debugger can capture, and it learns."""

from __future__ import annotations

import torch

from data.datasets.collate import collate_datapoints
from data.datasets.planted_signals import PlantedSignalsDataset
from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from models.signal_cnn import SignalCNN


def test_stages_keep_channels_and_a_time_axis():
    model = SignalCNN(num_classes=4).eval()
    modules = dict(model.named_modules())
    assert isinstance(modules["backbone.stage3.conv"], torch.nn.Conv1d)
    assert model.backbone(torch.randn(2, 1, 128)).shape == (2, 32, 32)
    assert model({"signal": torch.randn(3, 1, 128)})["logits"].shape == (3, 4)


def test_debuggers_capture_a_stage_as_channels_by_time():
    model = SignalCNN(num_classes=4).eval()
    outputs, stats = LayerOutputDebugger("backbone.stage3"), ActivationStatsDebugger("backbone.stage2")
    seen = {}

    def hook(debugger):
        return lambda module, args, output: seen.update({debugger.layer_name: debugger.process_forward(module, args,
                                                                                                       output)})
    for debugger in (outputs, stats):
        model.get_submodule(debugger.layer_name).register_forward_hook(hook(debugger))
    model({"signal": torch.randn(2, 1, 128)})
    assert tuple(seen["backbone.stage3"]["output"].shape) == (2, 32, 8)  # the time axis pooled by 4
    assert seen["backbone.stage3"]["original_shape"] == [32, 32]
    assert tuple(seen["backbone.stage2"]["channel_means"].shape) == (2, 32)


def test_it_trains_a_few_steps():
    torch.manual_seed(0)
    dataset = PlantedSignalsDataset(64, num_classes=4, seed=0)
    batch = collate_datapoints([dataset[i] for i in range(64)])
    model = SignalCNN(num_classes=4)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(15):
        loss = torch.nn.functional.cross_entropy(model(batch["inputs"])["logits"], batch["labels"]["class"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]

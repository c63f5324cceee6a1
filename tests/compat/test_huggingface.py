"""Hugging Face models (BERT, GPT-2, DistilBERT, T5's encoder, ViT, ResNet; random weights, built offline)
through real epochs: each debugger checked against an independent computation and for "batched equals alone"."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from debuggers.activation_stats_debugger import ActivationStatsDebugger
from debuggers.attention_debugger import AttentionDebugger
from debuggers.feature_map_debugger import FeatureMapDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.gradient_flow_debugger import GradientFlowDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.nan_inf_debugger import NaNInfDebugger
from tests.compat import huggingface as hf
from tests.compat.harness import ChannelEnergy, alone, assert_same_outputs, capture, check_flops, entry
from tests.compat.references import assert_gradcam_matches_captum

SEQUENCES = [[5, 6, 7], [8, 9, 10, 11, 12, 13], [14, 15], [16, 17, 18, 19, 20, 21]]


@pytest.mark.parametrize("build, layer", [(hf.bert, "model.bert.encoder.layer.0.attention.self"),
                                          (hf.gpt2, "model.transformer.h.1.attn"),
                                          (hf.distilbert, "model.distilbert.transformer.layer.1.attention"),
                                          (hf.t5_encoder, "model.encoder.block.0.layer.0.SelfAttention"),
                                          (hf.t5_encoder, "model.encoder.block.1.layer.0")],
                         ids=["BERT", "GPT-2", "DistilBERT", "T5 attention", "T5 layer"])
def test_text_models_with_padded_batches(tmp_path, build, layer):
    model = build()
    batches = hf.text_batches(SEQUENCES, 4)
    layer_index = int(next(part for part in layer.split(".") if part.isdigit()))
    debuggers = [entry("attention", AttentionDebugger, layer_name=layer),
                 entry("nan", NaNInfDebugger),
                 entry("gradients", GradientFlowDebugger, layer_types=["Linear", "Conv1D"])]
    if build is hf.bert:
        debuggers += [entry("pooled_stats", ActivationStatsDebugger, layer_name="model.bert.pooler"),
                      entry("pooled", LayerOutputDebugger, layer_name="model.bert.pooler"),
                      entry("user", ChannelEnergy, layer_name="model.bert.pooler.dense")]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    single = capture(model, alone(batches), tmp_path / "alone", debuggers)
    assert model.model.config._attn_implementation == "sdpa"  # given back after capture
    for i, sequence in enumerate(SEQUENCES):
        ids = torch.tensor([sequence])
        own = hf.eager_attentions(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})[layer_index][0]
        attention = batched[i]["attention"]
        assert attention["kind"] == "attention" and attention["attention"].shape == (2, len(sequence), len(sequence))
        np.testing.assert_allclose(attention["attention"], own.numpy(), rtol=1e-4, atol=1e-6)
        assert batched[i]["nan"]["first_module"] is None
        assert not batched[i]["gradients"]["missing"].any() and batched[i]["gradients"]["loss"] > 0
    assert_same_outputs(batched, single)
    check_flops(model, batches[0]["inputs"])


VISION_TRANSFORMERS = {  # builder, patch projection, attention layer, last norm
    "vit": (hf.vit, "model.vit.embeddings.patch_embeddings.projection", "model.vit.layers.1.attention",
            "model.vit.layernorm"),
    "clip_vision": (hf.clip_vision, "model.embeddings.patch_embedding", "model.encoder.layers.1.self_attn",
                    "model.post_layernorm"),
}


@pytest.mark.parametrize("name", VISION_TRANSFORMERS)
def test_vision_transformer(tmp_path, name):
    build, projection, attention_layer, norm = VISION_TRANSFORMERS[name]
    model = build()
    torch.manual_seed(1)
    images = torch.randn(4, 3, 16, 16)
    batches = hf.image_batches(images, 4)
    debuggers = [entry("attention", AttentionDebugger, layer_name=attention_layer),
                 entry("cam", GradCAMDebugger, target_layer=projection, input_key="pixel_values"),
                 entry("patches", FeatureMapDebugger, layer_name=projection),
                 entry("stats", ActivationStatsDebugger, layer_name=norm),
                 entry("nan", NaNInfDebugger), entry("gradients", GradientFlowDebugger, layer_types=["Linear"])]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    own = hf.eager_attentions(model, {"pixel_values": images})[1]
    for i in range(4):
        np.testing.assert_allclose(batched[i]["attention"]["attention"], own[i].numpy(), rtol=1e-4, atol=1e-6)
        assert batched[i]["patches"]["feature_map"].shape == (32, 4, 4)
    assert_gradcam_matches_captum(batched, model, projection, images)
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", debuggers))
    check_flops(model, batches[0]["inputs"])


def test_resnet(tmp_path):
    """Hugging Face's ResNet: `hidden_state += residual` after the block's last BatchNorm, in place."""
    model = hf.resnet()
    torch.manual_seed(2)
    images = torch.randn(4, 3, 16, 16)
    batches = hf.image_batches(images, 4)
    target = "model.resnet.encoder.stages.1.layers.0.layer.1.normalization"
    debuggers = [entry("cam", GradCAMDebugger, target_layer=target, input_key="pixel_values"),
                 entry("stage0", FeatureMapDebugger, layer_name="model.resnet.encoder.stages.0", max_channels=4),
                 entry("stats", ActivationStatsDebugger, layer_name="model.resnet.encoder.stages.1"),
                 entry("pooled", LayerOutputDebugger, layer_name="model.resnet.pooler"),
                 entry("user", ChannelEnergy, layer_name="model.resnet.encoder.stages.1"),
                 entry("gradients", GradientFlowDebugger, layer_types=["Conv2d", "Linear"]),
                 entry("nan", NaNInfDebugger)]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    assert_gradcam_matches_captum(batched, model, target, images)
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", debuggers))
    check_flops(model, batches[0]["inputs"])

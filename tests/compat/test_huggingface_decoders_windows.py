"""More Hugging Face architectures users bring (random weights, built offline): Llama and Mistral decoders
(rotary embeddings, grouped-query attention, Mistral's sliding window) padded on the left and the right and in a
generate()-style loop, encoder-decoders (BART, T5, two BERTs: decoder self- and cross-attention), CLIP's vision
tower, and Swin, whose windowed attention is refused with a message that says why; misspelled layer names list
the closest ones."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch import nn

from debuggers.attention_debugger import AttentionDebugger
from debuggers.gradcam_debugger import GradCAMDebugger
from debuggers.gradient_flow_debugger import GradientFlowDebugger
from debuggers.layer_output_debugger import LayerOutputDebugger
from debuggers.nan_inf_debugger import NaNInfDebugger
from debuggers.utils import UnknownLayerError
from tests.compat import huggingface as hf
from tests.compat.harness import alone, assert_same_outputs, capture, check_flops, entry
from tests.compat.references import assert_gradcam_matches_captum
from tests.debuggers.library import run_batches

SEQUENCES = [[5, 6, 7], [8, 9, 10, 11, 12, 13], [14, 15], [16, 17, 18, 19, 20, 21]]
# As long as the encoder's batch, padded differently: cropping a decoder's layer by the encoder's padding gives
# shapes that fit, and wrong tokens.
DECODED = [[2, 22, 23, 24, 25, 26], [2, 27], [2, 28, 29, 30], [2, 31, 32]]
DECODER_LAYER = "model.model.layers.1.self_attn"


def assert_attention(record: dict, own: torch.Tensor) -> None:
    np.testing.assert_allclose(record["attention"], own.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("left", [False, True], ids=["right-padded", "left-padded"])
@pytest.mark.parametrize("build", [hf.llama, hf.mistral], ids=["Llama", "Mistral"])
def test_decoders_with_padded_batches(tmp_path, build, left):
    model = build()
    batches = hf.text_batches(SEQUENCES, 4, left=left)
    debuggers = [entry("attention", AttentionDebugger, layer_name=DECODER_LAYER), entry("nan", NaNInfDebugger),
                 entry("gradients", GradientFlowDebugger, layer_types=["Linear"])]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    for i, sequence in enumerate(SEQUENCES):
        ids = torch.tensor([sequence])
        own = hf.eager_attentions(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})[1][0]
        assert batched[i]["attention"]["attention"].shape == (4, len(sequence), len(sequence))  # the query heads
        assert_attention(batched[i]["attention"], own)
        assert batched[i]["nan"]["first_module"] is None and not batched[i]["gradients"]["missing"].any()
    if build is hf.mistral:  # the last query sees the 3 tokens of its window only
        assert not batched[1]["attention"]["attention"][:, -1, :-3].any()
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", debuggers))
    check_flops(model, batches[0]["inputs"])


class GreedySteps(nn.Module):
    """What generate() does: the prompt, then one token at a time against the key/value cache, so each decoder
    layer runs once per step; the logits of the last step. Left-padded prompts, as generation needs."""

    def __init__(self, classifier: hf.HFClassifier, steps: int = 2) -> None:
        super().__init__()
        self.lm, self.steps = classifier.model, steps

    def forward(self, inputs: dict) -> dict:
        mask = inputs["attention_mask"]
        out = self.lm.model(input_ids=inputs["input_ids"], attention_mask=mask, use_cache=True)
        for _ in range(self.steps):
            token = self.lm.score(out.last_hidden_state[:, -1:]).argmax(-1) + 3  # a real token id
            mask = torch.cat([mask, torch.ones_like(token)], dim=1)
            out = self.lm.model(input_ids=token, attention_mask=mask, past_key_values=out.past_key_values,
                                use_cache=True)
        return {"logits": self.lm.score(out.last_hidden_state[:, -1])}


def test_decoder_layer_in_a_generation_loop_keeps_its_last_step(tmp_path):
    """The layer runs once per step: its last call's weights (one query over the prompt and the generated
    tokens) are kept, cropped by the layer's own mask, whose keys outgrow the batch's attention_mask."""
    model = GreedySteps(hf.llama()).eval()
    batches = hf.text_batches(SEQUENCES, 4, left=True)
    debuggers = [entry("attention", AttentionDebugger, layer_name="lm.model.layers.1.self_attn"),
                 entry("nan", NaNInfDebugger)]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    for i, sequence in enumerate(SEQUENCES):
        weights = batched[i]["attention"]["attention"]
        assert weights.shape == (4, 1, len(sequence) + 2)
        np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", debuggers))


ENCODER_DECODERS = {  # name: (build, {record: (layer, output_attentions field, its layer index)})
    "BART": (hf.bart, {"encoder": ("model.encoder.layers.1.self_attn", "encoder_attentions", 1),
                       "decoder": ("model.decoder.layers.1.self_attn", "decoder_attentions", 1),
                       "cross": ("model.decoder.layers.0.encoder_attn", "cross_attentions", 0)}),
    "T5": (hf.t5, {"decoder": ("model.decoder.block.1.layer.0.SelfAttention", "decoder_attentions", 1),  # mask=
                   "decoder_layer": ("model.decoder.block.1.layer.0", "decoder_attentions", 1),
                   "cross": ("model.decoder.block.0.layer.1.EncDecAttention", "cross_attentions", 0)}),
    "bert2bert": (hf.bert2bert, {  # BertLayer passes masks and encoder states by position
        "decoder": ("model.decoder.bert.encoder.layer.1.attention", "decoder_attentions", 1),
        "cross": ("model.decoder.bert.encoder.layer.0.crossattention", "cross_attentions", 0)})}


@pytest.mark.parametrize("name", list(ENCODER_DECODERS))
def test_encoder_decoder_self_and_cross_attention(tmp_path, name):
    """The decoder's layers are cropped by their own padding, not by the encoder's attention_mask (which was
    applied to them when the decoder's padded length happened to equal the encoder's), whether the layer gets its
    mask as attention_mask=, as T5Attention's mask=, or by position, as BertAttention does."""
    build, layers = ENCODER_DECODERS[name]
    model, batches = build(), hf.seq2seq_batches(SEQUENCES, DECODED)
    debuggers = [entry(record, AttentionDebugger, layer_name=layer) for record, (layer, _, _) in layers.items()]
    debuggers += [entry("nan", NaNInfDebugger)]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    for i, (encoded, decoded) in enumerate(zip(SEQUENCES, DECODED)):
        single = {"input_ids": torch.tensor([encoded]), "decoder_input_ids": torch.tensor([decoded])}
        for record, (_, field, index) in layers.items():
            assert_attention(batched[i][record], hf.eager_attentions(model, single, field)[index][0])
        assert batched[i]["cross"]["attention"].shape[1:] == (len(decoded), len(encoded))
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", debuggers))
    check_flops(model, batches[0]["inputs"])


def test_gradient_flags_of_an_encoder_decoder_batched_and_alone(tmp_path):
    """The first decoder position sees itself only: alone, its query and key projections get exactly no gradient
    (``zero``); in a padded batch rounding leaves them 1e-10 or so, which ``below_rounding`` flags either way."""
    model, batches = hf.bart(), hf.seq2seq_batches(SEQUENCES, DECODED)
    debuggers = [entry("gradients", GradientFlowDebugger, layer_types=["Linear"])]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    single = capture(model, alone(batches), tmp_path / "alone", debuggers)
    assert single[0]["gradients"]["zero"].any()
    for i in batched:
        flags, alone_flags = batched[i]["gradients"], single[i]["gradients"]
        np.testing.assert_array_equal(flags["below_rounding"], alone_flags["below_rounding"])
        assert not (alone_flags["zero"] & ~flags["below_rounding"]).any()
        assert not (flags["zero"] & ~flags["below_rounding"]).any()
    without_zero = [{i: {"gradients": {key: value for key, value in outputs[i]["gradients"].items() if key != "zero"}}
                     for i in outputs} for outputs in (batched, single)]
    assert_same_outputs(*without_zero)
    check_flops(model, batches[0]["inputs"])


def test_swin(tmp_path):
    """Grad-CAM, block outputs, NaN and gradients work per datapoint; the windowed attention is refused with why."""
    model = hf.swin()
    torch.manual_seed(3)
    images = torch.randn(4, 3, 16, 16)
    batches = hf.image_batches(images, 4)
    projection = "model.swin.embeddings.patch_embeddings.projection"
    debuggers = [entry("cam", GradCAMDebugger, target_layer=projection, input_key="pixel_values"),
                 entry("block", LayerOutputDebugger, layer_name="model.swin.encoder.layers.0.blocks.1.layernorm_after"),
                 entry("nan", NaNInfDebugger), entry("gradients", GradientFlowDebugger, layer_types=["Linear"])]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    assert_gradcam_matches_captum(batched, model, projection, images)
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", debuggers))
    check_flops(model, batches[0]["inputs"])
    for layer, windows in (("model.swin.encoder.layers.0.blocks.1.attention", 16),
                           ("model.swin.encoder.layers.1.blocks.0.attention", 4)):
        _, outputs = run_batches(model, batches, tmp_path / f"attention{windows}",
                                 [entry("attention", AttentionDebugger, layer_name=layer)])
        record = outputs[0]["attention"]
        assert record["kind"] == "error" and re.search(
            rf"{4 * windows} rows, {windows} per datapoint .* windowed attention .* 'swin.encoder.layers.0.blocks.1."
            "layernorm_after'", record["message"]), record


@pytest.mark.parametrize("build, typo, meant", [
    (hf.llama, "model.model.layers.1.self_atn", DECODER_LAYER),
    (hf.bart, "model.decoder.layer.0.encoder_attn", "model.decoder.layers.0.encoder_attn"),
    (hf.swin, "model.swin.encoder.layers.0.block.1", "model.swin.encoder.layers.0.blocks.1")],
    ids=["Llama", "BART", "Swin"])
def test_misspelled_layer_lists_the_closest_names(tmp_path, build, typo, meant):
    with pytest.raises(UnknownLayerError, match=rf"no layer '{typo}'; closest existing names: \[[^]]*'{meant}'"):
        capture(build(), hf.text_batches(SEQUENCES, 4), tmp_path, [entry("output", LayerOutputDebugger,
                                                                          layer_name=typo)])

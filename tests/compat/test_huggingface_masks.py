"""Which tokens AttentionDebugger counts as real, where the mask is not the plain (B, L) one: a user's 4-D mask
whose padded query rows are NaN, bfloat16 weights, a sliding window over a key/value cache that keeps every
key, an encoder-decoder layer given no mask of its own; and batches the model repeats (beam search), refused."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch import nn
from transformers import DynamicCache

from debuggers.attention_debugger import AttentionDebugger
from tests.compat import huggingface as hf
from tests.compat.harness import alone, assert_same_outputs, capture, entry
from tests.debuggers.library import run_batches

SEQUENCES = [[5, 6, 7], [8, 9, 10, 11, 12, 13], [14, 15], [16, 17, 18, 19, 20, 21]]
DECODED = [[2, 22, 23, 24, 25, 26], [2, 27], [2, 28, 29, 30], [2, 31, 32]]  # padded as long as SEQUENCES, differently
NEXT_TOKEN = 11


class UserMask(nn.Module):
    """A left-padded Llama called with the user's own 4-D additive mask, -inf wherever a query may not look: a
    padded query sees no key, so its row of weights is NaN (the model's own, cropped away)."""

    def __init__(self) -> None:
        super().__init__()
        self.lm = hf.llama().model

    def forward(self, inputs: dict) -> dict:
        mask = inputs["attention_mask"]
        length = mask.shape[1]
        allowed = torch.tril(torch.ones(length, length, dtype=torch.bool))[None, None] & mask.bool()[:, None, None]
        additive = torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))
        out = self.lm.model(input_ids=inputs["input_ids"], attention_mask=additive,
                            position_ids=(mask.cumsum(1) - 1).clamp(min=0))
        return {"logits": self.lm.score(out.last_hidden_state[:, -1])}


def test_nan_rows_of_padded_queries_leave_the_entropy_finite(tmp_path):
    model = UserMask().eval()
    batches = hf.text_batches(SEQUENCES, 4, left=True)
    debuggers = [entry("attention", AttentionDebugger, layer_name="lm.model.layers.0.self_attn")]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    for i, sequence in enumerate(SEQUENCES):
        record = batched[i]["attention"]
        assert record["attention"].shape == (4, len(sequence), len(sequence))
        assert np.isfinite(record["entropy_per_head"]).all(), record["entropy_per_head"]
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", debuggers))


@pytest.mark.parametrize("build, layer, left", [
    (hf.bert, "model.bert.encoder.layer.1.attention.self", False),
    (hf.distilbert, "model.distilbert.transformer.layer.1.attention", False),
    (hf.llama, "model.model.layers.1.self_attn", True)], ids=["BERT", "DistilBERT", "Llama-left-padded"])
def test_bfloat16_weights_of_padded_batches(tmp_path, build, layer, left):
    """bfloat16 keeps 8 bits: a row of weights sums to 1 +- 0.002 or so, still softmaxed weights."""
    model = build().to(torch.bfloat16)
    batches = hf.text_batches(SEQUENCES, 4, left=left)
    debuggers = [entry("attention", AttentionDebugger, layer_name=layer)]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    index = int(next(part for part in layer.split(".") if part.isdigit()))
    for i, sequence in enumerate(SEQUENCES):
        ids = torch.tensor([sequence])
        own = hf.eager_attentions(model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})[index][0]
        assert batched[i]["attention"]["kind"] == "attention", batched[i]["attention"]
        np.testing.assert_allclose(batched[i]["attention"]["attention"], own.float().numpy(), atol=2e-2)
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", debuggers), rtol=2e-2,
                        atol=2e-2)


class WindowStep(nn.Module):
    """Mistral (a sliding window of 3) reads a left-padded prompt into a cache made without its config
    (``DynamicCache()`` keeps every key), then takes one step: its query sees the last 3 keys, and gives the
    older ones, real tokens, weight 0."""

    def __init__(self) -> None:
        super().__init__()
        self.lm = hf.mistral().model

    def step(self, inputs: dict, output_attentions: bool = False) -> object:
        mask, cache = inputs["attention_mask"], DynamicCache()
        self.lm.model(input_ids=inputs["input_ids"], attention_mask=mask, past_key_values=cache, use_cache=True)
        token = torch.full((mask.shape[0], 1), NEXT_TOKEN)
        return self.lm.model(input_ids=token, attention_mask=torch.cat([mask, torch.ones_like(token)], dim=1),
                             past_key_values=cache, use_cache=True, output_attentions=output_attentions)

    def forward(self, inputs: dict) -> dict:
        return {"logits": self.lm.score(self.step(inputs).last_hidden_state[:, -1])}


def test_a_step_over_a_cache_keeps_the_keys_outside_the_window(tmp_path):
    """Keys no query sees are padding only where the batch's attention_mask says so: the ones a sliding window
    hides are kept, as the model's own weights have them."""
    model = WindowStep().eval()
    batches = hf.text_batches(SEQUENCES, 4, left=True)
    debuggers = [entry("attention", AttentionDebugger, layer_name="lm.model.layers.1.self_attn")]
    batched = capture(model, batches, tmp_path / "batched", debuggers)
    for i, sequence in enumerate(SEQUENCES):
        ids = torch.tensor([sequence])
        implementation, model.lm.config._attn_implementation = model.lm.config._attn_implementation, "eager"
        with torch.no_grad():
            own = model.step({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, True).attentions[1][0]
        model.lm.config._attn_implementation = implementation
        assert own.shape == (4, 1, len(sequence) + 1)
        np.testing.assert_allclose(batched[i]["attention"]["attention"], own.numpy(), rtol=1e-4, atol=1e-6)
    assert not batched[1]["attention"]["attention"][..., :-3].any()
    assert_same_outputs(batched, capture(model, alone(batches), tmp_path / "alone", debuggers))


class Beams(nn.Module):
    """What generate(num_beams=2) or num_return_sequences=2 does to the batch: each datapoint twice."""

    def __init__(self) -> None:
        super().__init__()
        self.lm = hf.llama().model

    def forward(self, inputs: dict) -> dict:
        out = self.lm.model(input_ids=inputs["input_ids"].repeat_interleave(2, 0),
                            attention_mask=inputs["attention_mask"].repeat_interleave(2, 0))
        return {"logits": self.lm.score(out.last_hidden_state[::2, -1])}


def test_a_repeated_batch_is_refused_saying_why(tmp_path):
    batches = hf.text_batches(SEQUENCES, 4, left=True)
    _, outputs = run_batches(Beams().eval(), batches, tmp_path,
                             [entry("attention", AttentionDebugger, layer_name="lm.model.layers.1.self_attn")])
    record = outputs[0]["attention"]
    assert record["kind"] == "error" and re.search(
        r"8 rows, 2 per datapoint of the batch of 4\. The model repeats or splits its batch: beam search.* "
        r"num_beams=1", record["message"]), record
    assert "Swin" not in record["message"].split("whose:")[1]  # the windowed-attention advice is Swin's only


class TinyTransformer(nn.Module):
    """torch's nn.Transformer as an encoder-decoder: the encoder's padding is given to it, the decoder's is not,
    so the decoder's self-attention has no mask of its own to be cropped by."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(hf.VOCAB, 8)
        self.transformer = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                          dim_feedforward=16, dropout=0.0, batch_first=True)
        self.head = nn.Linear(8, hf.NUM_CLASSES)

    def forward(self, inputs: dict) -> dict:
        padding = inputs["attention_mask"] == 0
        out = self.transformer(self.embed(inputs["input_ids"]), self.embed(inputs["decoder_input_ids"]),
                               src_key_padding_mask=padding, memory_key_padding_mask=padding)
        return {"logits": self.head(out[:, 0])}


def test_a_decoder_layer_without_a_mask_is_not_cropped_by_the_encoders(tmp_path):
    """The batch's attention_mask is the encoder's: a decoder's layer with no mask of its own is cropped by
    decoder_attention_mask where the layer says it is a decoder's (``is_decoder``), and refused where it does not
    say, never cropped by the encoder's padding."""
    model = TinyTransformer().eval()
    layer = "transformer.decoder.layers.0.self_attn"
    debuggers = [entry("attention", AttentionDebugger, layer_name=layer)]
    _, outputs = run_batches(model, hf.seq2seq_batches(SEQUENCES, DECODED), tmp_path / "unknown", debuggers)
    assert outputs[0]["attention"]["kind"] == "error" and re.search(
        r"no attention mask of its own.*is_decoder \(True: cropped by inputs\['decoder_attention_mask'\]",
        outputs[0]["attention"]["message"]), outputs[0]["attention"]
    model.get_submodule(layer).is_decoder = True
    _, outputs = run_batches(model, hf.seq2seq_batches(SEQUENCES, DECODED), tmp_path / "decoder", debuggers)
    for i, decoded in enumerate(DECODED):
        assert outputs[i]["attention"]["attention"].shape == (2, len(decoded), len(decoded))

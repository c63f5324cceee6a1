"""Hugging Face ``transformers`` models for the compatibility suite, built offline from their config
classes with random weights (nothing is downloaded), tiny: hidden size 32, 2 layers, 16x16 images."""

from __future__ import annotations

import torch
from torch import nn
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DistilBertConfig,
    DistilBertForSequenceClassification,
    GPT2Config,
    GPT2ForSequenceClassification,
    ResNetConfig,
    ResNetForImageClassification,
    T5Config,
    T5EncoderModel,
    ViTConfig,
    ViTForImageClassification,
)

NUM_CLASSES = 3
VOCAB = 40
PAD = 0  # token id of padding; real tokens are 1..VOCAB-1


class HFClassifier(nn.Module):
    """Lantern's model contract around a Hugging Face classifier: ``forward(inputs) -> {'logits'}``."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, inputs: dict) -> dict:
        return {"logits": self.model(**inputs).logits}


def bert() -> HFClassifier:
    torch.manual_seed(0)
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=NUM_CLASSES, pad_token_id=PAD)
    return _eval(BertForSequenceClassification(config))


def distilbert() -> HFClassifier:
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                              max_position_embeddings=32, num_labels=NUM_CLASSES, pad_token_id=PAD)
    return _eval(DistilBertForSequenceClassification(config))


def gpt2() -> HFClassifier:
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=32, num_labels=NUM_CLASSES,
                        pad_token_id=PAD, bos_token_id=1, eos_token_id=1)
    return _eval(GPT2ForSequenceClassification(config))


class T5EncoderClassifier(nn.Module):
    """T5's encoder, its real tokens averaged, and a linear head. T5's attention modules return
    (output, position_bias, weights), not (output, weights)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        config = T5Config(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
                          pad_token_id=PAD)
        self.model = T5EncoderModel(config)
        self.head = nn.Linear(32, NUM_CLASSES)

    def forward(self, inputs: dict) -> dict:
        hidden = self.model(**inputs).last_hidden_state
        real = inputs["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return {"logits": self.head((hidden * real).sum(1) / real.sum(1).clamp(min=1))}


def t5_encoder() -> T5EncoderClassifier:
    return T5EncoderClassifier().eval()


def vit() -> HFClassifier:
    torch.manual_seed(0)
    config = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       image_size=16, patch_size=4, num_labels=NUM_CLASSES)
    return _eval(ViTForImageClassification(config))


def resnet() -> HFClassifier:
    torch.manual_seed(0)
    config = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
                          num_labels=NUM_CLASSES)
    return _eval(ResNetForImageClassification(config))


def _eval(model: nn.Module) -> HFClassifier:
    return HFClassifier(model).eval()


def text_batches(sequences: list[list[int]], batch_size: int) -> list[dict]:
    """Collated, right-padded batches with ``attention_mask``, as a tokenizer gives them."""
    batches = []
    for start in range(0, len(sequences), batch_size):
        chunk = sequences[start:start + batch_size]
        length = max(len(s) for s in chunk)
        ids = torch.tensor([s + [PAD] * (length - len(s)) for s in chunk])
        batches.append({"inputs": {"input_ids": ids, "attention_mask": (ids != PAD).long()},
                        "labels": {"class": torch.arange(start, start + len(chunk)) % NUM_CLASSES},
                        "meta_info": {"idx": torch.arange(start, start + len(chunk))}})
    return batches


def image_batches(images: torch.Tensor, batch_size: int, key: str = "pixel_values") -> list[dict]:
    return [{"inputs": {key: images[s:s + batch_size]},
             "labels": {"class": torch.arange(s, min(s + batch_size, len(images))) % NUM_CLASSES},
             "meta_info": {"idx": torch.arange(s, min(s + batch_size, len(images)))}}
            for s in range(0, len(images), batch_size)]

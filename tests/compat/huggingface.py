"""Hugging Face ``transformers`` models for the compatibility suite, built offline from their config
classes with random weights (nothing is downloaded), tiny: hidden size 32 (Swin: 16), 2 layers, 16x16 images."""

from __future__ import annotations

import torch
from torch import nn
from transformers import (
    BartConfig,
    BartModel,
    BertConfig,
    BertForSequenceClassification,
    CLIPVisionConfig,
    CLIPVisionModel,
    DistilBertConfig,
    DistilBertForSequenceClassification,
    EncoderDecoderConfig,
    EncoderDecoderModel,
    GPT2Config,
    GPT2ForSequenceClassification,
    LlamaConfig,
    LlamaForSequenceClassification,
    MistralConfig,
    MistralForSequenceClassification,
    ResNetConfig,
    ResNetForImageClassification,
    SwinConfig,
    SwinForImageClassification,
    T5Config,
    T5EncoderModel,
    T5Model,
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


def llama() -> HFClassifier:
    """Rotary embeddings, grouped-query attention (4 query heads share 2 key/value heads)."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         num_labels=NUM_CLASSES, pad_token_id=PAD, bos_token_id=1, eos_token_id=2)
    return _eval(LlamaForSequenceClassification(config))


def mistral() -> HFClassifier:
    """Grouped-query attention (one key/value head) and a sliding window of 3 tokens."""
    torch.manual_seed(0)
    config = MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=64,
                           sliding_window=3, num_labels=NUM_CLASSES, pad_token_id=PAD, bos_token_id=1, eos_token_id=2)
    return _eval(MistralForSequenceClassification(config))


class Seq2SeqClassifier(nn.Module):
    """An encoder-decoder (encoder, decoder with self- and cross-attention) and a linear head on the decoder's
    first token: its last hidden state, or its logits where the model gives no hidden state."""

    def __init__(self, model: nn.Module, width: int = 32) -> None:
        super().__init__()
        self.model = model
        self.head = nn.Linear(width, NUM_CLASSES)

    def forward(self, inputs: dict) -> dict:
        output = self.model(**inputs)
        hidden = getattr(output, "last_hidden_state", None)
        return {"logits": self.head((output.logits if hidden is None else hidden)[:, 0])}


def bart() -> Seq2SeqClassifier:
    torch.manual_seed(0)
    config = BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=PAD, bos_token_id=1,
                        eos_token_id=2, decoder_start_token_id=2)
    return Seq2SeqClassifier(BartModel(config)).eval()


def t5() -> Seq2SeqClassifier:
    """T5's attention modules are called with ``mask=``, not ``attention_mask=``."""
    torch.manual_seed(0)
    config = T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, pad_token_id=PAD,
                      decoder_start_token_id=2)
    return Seq2SeqClassifier(T5Model(config)).eval()


def bert2bert() -> Seq2SeqClassifier:
    """Two BERTs as encoder and decoder: BertLayer passes its attention modules masks and encoder states by
    position, the cross-attention's mask as ``encoder_attention_mask``."""
    torch.manual_seed(0)
    sizes = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 max_position_embeddings=32, pad_token_id=PAD)
    config = EncoderDecoderConfig.from_encoder_decoder_configs(
        BertConfig(**sizes), BertConfig(**sizes, is_decoder=True, add_cross_attention=True))
    config.decoder_start_token_id, config.pad_token_id = 2, PAD
    return Seq2SeqClassifier(EncoderDecoderModel(config), width=VOCAB).eval()


class CLIPVisionClassifier(nn.Module):
    """CLIP's vision tower (class token, pre-LayerNorm) and a linear head on its pooled output."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        config = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                                  image_size=16, patch_size=4)
        self.model = CLIPVisionModel(config)
        self.head = nn.Linear(32, NUM_CLASSES)

    def forward(self, inputs: dict) -> dict:
        return {"logits": self.head(self.model(**inputs).pooler_output)}


def clip_vision() -> CLIPVisionClassifier:
    return CLIPVisionClassifier().eval()


def swin() -> HFClassifier:
    """Windowed attention over 2x2 windows (shifted in every second block): (windows x B, heads, 4, 4) weights."""
    torch.manual_seed(0)
    config = SwinConfig(image_size=16, patch_size=2, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=2,
                        num_labels=NUM_CLASSES)
    return _eval(SwinForImageClassification(config))


def _eval(model: nn.Module) -> HFClassifier:
    return HFClassifier(model).eval()


def padded(sequences: list[list[int]], left: bool = False) -> torch.Tensor:
    """(B, L) token ids, padded with PAD on the right (or the left, as decoders are for generation)."""
    length = max(len(s) for s in sequences)
    return torch.tensor([[PAD] * (length - len(s)) + s if left else s + [PAD] * (length - len(s)) for s in sequences])


def eager_attentions(model: nn.Module, inputs: dict, field: str = "attentions") -> tuple:
    """The wrapped model's own ``output_attentions`` (eager: the implementation that returns them, in every
    config of the model: an EncoderDecoderModel's encoder and decoder have their own); ``field`` names an
    encoder-decoder's ``encoder_attentions``, ``decoder_attentions`` or ``cross_attentions``."""
    configs = {id(module.config): module.config for module in model.model.modules()
               if hasattr(getattr(module, "config", None), "_attn_implementation")}
    before = {key: config._attn_implementation for key, config in configs.items()}
    for config in configs.values():
        config._attn_implementation = "eager"
    try:
        with torch.no_grad():
            return getattr(model.model(**inputs, output_attentions=True), field)
    finally:
        for key, config in configs.items():
            config._attn_implementation = before[key]


def text_batches(sequences: list[list[int]], batch_size: int, left: bool = False) -> list[dict]:
    """Collated, padded batches with ``attention_mask``, as a tokenizer gives them."""
    batches = []
    for start in range(0, len(sequences), batch_size):
        chunk = sequences[start:start + batch_size]
        ids = padded(chunk, left)
        batches.append({"inputs": {"input_ids": ids, "attention_mask": (ids != PAD).long()},
                        "labels": {"class": torch.arange(start, start + len(chunk)) % NUM_CLASSES},
                        "meta_info": {"idx": torch.arange(start, start + len(chunk))}})
    return batches


def image_batches(images: torch.Tensor, batch_size: int, key: str = "pixel_values") -> list[dict]:
    return [{"inputs": {key: images[s:s + batch_size]},
             "labels": {"class": torch.arange(s, min(s + batch_size, len(images))) % NUM_CLASSES},
             "meta_info": {"idx": torch.arange(s, min(s + batch_size, len(images)))}}
            for s in range(0, len(images), batch_size)]


def seq2seq_batches(encoded: list[list[int]], decoded: list[list[int]]) -> list[dict]:
    """One batch of an encoder-decoder's inputs, each side right-padded, with its attention mask."""
    encoder_ids, decoder_ids = padded(encoded), padded(decoded)
    return [{"inputs": {"input_ids": encoder_ids, "attention_mask": (encoder_ids != PAD).long(),
                        "decoder_input_ids": decoder_ids, "decoder_attention_mask": (decoder_ids != PAD).long()},
             "labels": {"class": torch.arange(len(encoded)) % NUM_CLASSES},
             "meta_info": {"idx": torch.arange(len(encoded))}}]

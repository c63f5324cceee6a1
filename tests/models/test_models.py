"""SmallCNN and AttentionClassifier: shapes, module names, attention maths, capture points."""

import math

import pytest
import torch

from debuggers import capture
from models import AttentionClassifier, SmallCNN
from models.attention_classifier import MultiHeadSelfAttention


@pytest.fixture
def vit() -> AttentionClassifier:
    torch.manual_seed(0)
    return AttentionClassifier(num_classes=5).eval()


@pytest.mark.parametrize("model_cls", [SmallCNN, AttentionClassifier])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_logits_shape(model_cls, batch_size):
    model = model_cls(num_classes=4).eval()
    out = model({"image": torch.randn(batch_size, 3, 32, 32)})
    assert set(out) == {"logits"}
    assert out["logits"].shape == (batch_size, 4)


def test_small_cnn_named_modules_and_spatial_layer4():
    model = SmallCNN()
    modules = dict(model.named_modules())
    for name in ("backbone.layer1", "backbone.layer2", "backbone.layer3", "backbone.layer4"):
        assert name in modules
    assert isinstance(modules["head.fc"], torch.nn.Linear)
    assert model.backbone(torch.randn(2, 3, 32, 32)).shape == (2, 64, 4, 4)


def test_small_cnn_rejects_wrong_number_of_widths():
    with pytest.raises(ValueError, match="4 channel counts"):
        SmallCNN(widths=(8, 16))


def test_attention_classifier_named_modules(vit):
    modules = dict(vit.named_modules())
    for name in ("patch_embed", "pos_embed", "blocks.0.attn", "blocks.1.attn", "norm", "head"):
        assert name in modules
    assert isinstance(modules["blocks.1.attn"], MultiHeadSelfAttention)
    assert modules["blocks.1.attn"].name == "blocks.1.attn"


def test_attention_weights_match_hand_written_softmax():
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(dim=16, num_heads=4, name="blocks.0.attn")
    attn.return_attention = True
    x = torch.randn(2, 9, 16)
    out, weights = attn(x, (3, 3))
    q, k, _ = (x @ attn.qkv.weight.T + attn.qkv.bias).split(16, dim=-1)
    q = q.reshape(2, 9, 4, 4).transpose(1, 2)
    k = k.reshape(2, 9, 4, 4).transpose(1, 2)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(4), dim=-1)
    assert out.shape == (2, 9, 16)
    assert weights.shape == (2, 4, 9, 9)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 9))


def test_return_attention_off_returns_tensor_and_model_still_runs(vit):
    attn = vit.blocks[0].attn
    assert isinstance(attn(torch.randn(1, 4, 64), (2, 2)), torch.Tensor)
    image = {"image": torch.randn(2, 3, 32, 32)}
    plain = vit(image)["logits"]
    attn.return_attention = True
    torch.testing.assert_close(vit(image)["logits"], plain)


def test_position_encoding_is_fixed_and_distinct_per_token(vit):
    encoding = vit.pos_embed.encoding((8, 8), torch.device("cpu"), torch.float32)
    assert encoding.shape == (1, 64, 64)
    assert torch.unique(encoding[0], dim=0).shape[0] == 64
    assert not list(vit.pos_embed.parameters())


def test_bad_attention_sizes_raise_value_error():
    with pytest.raises(ValueError, match="divisible by num_heads"):
        AttentionClassifier(dim=64, num_heads=5)
    with pytest.raises(ValueError, match="divisible by 4"):
        AttentionClassifier(dim=66, num_heads=3)


def test_capture_points_arrive_batch_first_or_declare_no_batch(vit):
    received = {}

    def listener(component, state, data, metadata):
        received[(component, state)] = (tuple(data.shape), metadata)

    with capture.listen(listener):
        vit({"image": torch.randn(3, 3, 32, 32)})

    grid = {"grid": (8, 8)}
    assert received[("pos_embed", "position_encoding")] == ((64, 64), {**grid, "batch_dim": None})  # no batch
    assert received[("patch_embed", "embeddings")] == ((3, 64, 8, 8), grid)
    for i in (0, 1):
        for state in ("attention_scores", "attention_weights"):
            assert received[(f"blocks.{i}.attn", state)] == ((3, 4, 64, 64), grid)
    assert len(received) == 6


def test_captured_scores_softmax_to_captured_weights(vit):
    received = {}
    with capture.listen(lambda c, s, data, m: received.setdefault((c, s), data)):
        vit({"image": torch.randn(2, 3, 32, 32)})
    scores = received[("blocks.0.attn", "attention_scores")]
    torch.testing.assert_close(scores.softmax(-1), received[("blocks.0.attn", "attention_weights")])


def test_without_listener_nothing_is_captured(vit, monkeypatch):
    calls = []
    monkeypatch.setattr(capture, "_listeners", {})
    handle = capture.listen(lambda *args: calls.append(args))
    handle.remove()
    vit({"image": torch.randn(1, 3, 32, 32)})
    assert calls == []
    assert not capture.is_debug_enabled()


def test_outputs_identical_with_and_without_listener(vit):
    image = {"image": torch.randn(2, 3, 32, 32)}
    plain = vit(image)["logits"]
    with capture.listen(lambda *args: None):
        listened = vit(image)["logits"]
    assert torch.equal(plain, listened)

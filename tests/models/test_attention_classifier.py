"""AttentionClassifier reading token sequences: padding gets no attention and changes no prediction."""

from __future__ import annotations

import torch

from debuggers import capture
from models import AttentionClassifier
from models.attention_classifier import PAD


def model() -> AttentionClassifier:
    torch.manual_seed(0)
    return AttentionClassifier(num_classes=3, vocab_size=20, dim=16, depth=2, num_heads=4).eval()


def test_padding_changes_no_prediction():
    classifier = model()
    tokens = torch.tensor([[5, 6, 7, 8, PAD, PAD], [9, 10, 11, 12, 13, 14]])
    longer = torch.cat([tokens, torch.full((2, 5), PAD)], dim=1)
    with torch.no_grad():
        logits = classifier({"tokens": tokens})["logits"]
        assert logits.shape == (2, 3)
        assert torch.allclose(logits, classifier({"tokens": longer})["logits"], atol=1e-5)
        assert torch.allclose(logits[:1], classifier({"tokens": tokens[:1, :4]})["logits"], atol=1e-5)


def test_no_query_attends_to_padding():
    classifier = model()
    seen = []
    with capture.listen(lambda component, state, value, metadata: seen.append((component, state, value))), \
            torch.no_grad():
        classifier({"tokens": torch.tensor([[5, 6, 7, PAD, PAD]])})
    weights = [value for component, state, value in seen if state == "attention_weights"]
    assert len(weights) == 2
    assert all(float(w[..., 3:].abs().max()) == 0 and torch.allclose(w.sum(-1), torch.ones(1)) for w in weights)
    assert "token_embed" in dict(classifier.named_modules()) and "patch_embed" not in dict(classifier.named_modules())

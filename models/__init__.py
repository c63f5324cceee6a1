"""Reference models for exercising Lantern's debuggers."""

from models.attention_classifier import AttentionClassifier
from models.small_cnn import SmallCNN

__all__ = ["AttentionClassifier", "SmallCNN"]

"""Reference models for exercising Lantern's debuggers."""

from models.attention_classifier import AttentionClassifier
from models.promptable_segmenter import PromptableSegmenter
from models.promptable_video_segmenter import PromptableVideoSegmenter
from models.signal_cnn import SignalCNN
from models.small_cnn import SmallCNN

__all__ = ["AttentionClassifier", "PromptableSegmenter", "PromptableVideoSegmenter", "SignalCNN", "SmallCNN"]

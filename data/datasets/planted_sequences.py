"""Short messages as token sequences of variable length, padded, with planted causes of failure and their ground
truth (``planted(idx)``): a benchmark of another modality and structure than images for the failure analysis.

A message is its source's token, then 12 to 40 tokens: filler words with three to five keywords of its topic
(``CLASS_NAMES``) and, in half the messages, one keyword of another topic; ``inputs['tokens']`` pads it with
``PAD`` (0) to ``MAX_LENGTH``, and ``inputs['attention_mask']`` is 1 on its real tokens. The meta info a
platform records: ``source`` (web, app, email, legacy: each with its own first token), ``channel`` (chat, mail,
sms, form) and ``wer`` (the word error rate of its transcription, uniform in [0, 0.5]), and four fields that
carry nothing (``author``, ``hour``, ``replies``, ``pinned``). The planted causes, all off by default:

- ``systematic=(a, b)``: topic ``a``'s messages from the ``legacy`` source are labelled ``b`` in training (an old
  label scheme mapped wrong), rightly in validation: the model learns ``b`` for them;
- ``variant_prob=p``: that share of messages spells its keywords another way (tokens of their own, a rare
  variant no meta column records);
- ``truncated_channel=c``: channel ``c``'s messages are cut after ``TRUNCATED_LENGTH`` tokens (meta ``channel``);
- ``garbled_from=w``: a transcript whose ``wer`` is ``w`` or more lost most of its keywords, whatever its topic
  (meta ``wer``, a threshold);
- ``label_noise=p``: that share of labels replaced by another topic at random.

Datapoints are drawn from ``numpy.random.default_rng([seed, split, idx, stream])``, each cause from a stream of
its own, so turning one on changes no other datapoint's draws.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import Dataset

from data.datasets.planted import Marks, check_planted, check_shares, other_class, planted_label
from data.datasets.synthetic_shapes import SPLIT_CODES
from models.attention_classifier import PAD

SOURCES = ("web", "app", "email", "legacy")
CHANNELS = ("chat", "mail", "sms", "form")
AUTHORS = ("ana", "ben", "chen", "dara", "eli", "femi", "gus", "hana")
MAX_WER = 0.5
BODY_LENGTH = (12, 40)  # the fewest and most tokens after the source's
MAX_LENGTH = 1 + BODY_LENGTH[1]
KEYWORDS = (3, 5)  # of its own topic in a message
CONFUSER_PROB = 0.5  # a message holding one keyword of another topic
TRUNCATED_LENGTH = 5  # tokens a truncated message keeps after the source's
GARBLED_LOSS = 0.8  # the share of keywords a garbled transcript loses
FILLER = 100  # filler words
PER_CLASS = 6  # keywords per topic
FIRST_FILLER = 1 + len(SOURCES)
FIRST_KEYWORD = FIRST_FILLER + FILLER


class PlantedSequencesDataset(Dataset):
    """Topic-labelled token sequences with source, channel and transcription meta info and the planted causes of
    the module docstring."""

    CLASS_NAMES: tuple[str, ...] = ("billing", "delivery", "login", "refund", "warranty", "account")
    VOCAB_SIZE = FIRST_KEYWORD + 2 * PER_CLASS * len(CLASS_NAMES)  # keywords in both spellings

    def __init__(self, num_datapoints: int = 2000, num_classes: int = 4, seed: int = 0, split: str = "train",
                 systematic: Optional[tuple[int, int]] = None, variant_prob: float = 0.0,
                 truncated_channel: Optional[str] = None, garbled_from: Optional[float] = None,
                 label_noise: float = 0.0) -> None:
        check_planted(num_datapoints, num_classes, len(self.CLASS_NAMES), split, systematic)
        check_shares(variant_prob=variant_prob, label_noise=label_noise)
        if truncated_channel is not None and truncated_channel not in CHANNELS:
            raise ValueError(f"truncated_channel must be one of {CHANNELS}, got {truncated_channel!r}")
        self.num_datapoints, self.num_classes, self.seed, self.split = num_datapoints, num_classes, seed, split
        self.systematic, self.variant_prob, self.truncated_channel = systematic, variant_prob, truncated_channel
        self.garbled_from, self.label_noise = garbled_from, label_noise

    def set_base_seed(self, seed: int) -> None:
        """Accepted for the runners' sake: datapoints never depend on it."""

    def __len__(self) -> int:
        return self.num_datapoints

    def __getitem__(self, idx: int) -> dict[str, Any]:
        if not 0 <= idx < self.num_datapoints:
            raise IndexError(f"index {idx} is out of range for a dataset of {self.num_datapoints} datapoints")
        topic, meta = self._record(int(idx))
        marks = self._plant(int(idx), topic, meta)
        message = self._write(int(idx), topic, meta, marks)
        tokens = np.full(MAX_LENGTH, PAD, dtype=np.int64)
        tokens[:len(message)] = message
        label = planted_label(topic, marks, self.split, self.systematic[1] if self.systematic else topic,
                              other_class(self._rng(int(idx), 2), topic, self.num_classes))
        return {"inputs": {"tokens": torch.from_numpy(tokens),
                           "attention_mask": torch.from_numpy((tokens != PAD).astype(np.int64))},
                "labels": {"class": torch.tensor(label, dtype=torch.int64)},
                "meta_info": {"idx": int(idx), **meta}}

    def planted(self, idx: int) -> Marks:
        """The planted causes datapoint ``idx`` carries."""
        topic, meta = self._record(idx)
        return self._plant(idx, topic, meta)

    def true_class(self, idx: int) -> int:
        """The topic datapoint ``idx`` was written on (its label unless a planted cause changed it)."""
        return self._record(idx)[0]

    def _rng(self, idx: int, stream: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, SPLIT_CODES[self.split], idx, stream])

    def _record(self, idx: int) -> tuple[int, dict[str, Any]]:
        """The topic and the meta info a platform records (the noise fields included)."""
        rng = self._rng(idx, 0)
        return int(rng.integers(self.num_classes)), {
            "source": SOURCES[int(rng.integers(len(SOURCES)))], "channel": CHANNELS[int(rng.integers(len(CHANNELS)))],
            "wer": float(rng.uniform(0, MAX_WER)), "author": AUTHORS[int(rng.integers(len(AUTHORS)))],
            "hour": float(rng.uniform(0, 24)), "replies": int(rng.integers(30)), "pinned": bool(rng.random() < 0.2)}

    def _plant(self, idx: int, topic: int, meta: dict[str, Any]) -> Marks:
        draws = self._rng(idx, 1).random(2)
        return Marks(systematic=self.systematic is not None and topic == self.systematic[0]
                     and meta["source"] == "legacy",
                     variant=bool(draws[0] < self.variant_prob), flipped=bool(draws[1] < self.label_noise),
                     category=meta["channel"] == self.truncated_channel,
                     above=self.garbled_from is not None and meta["wer"] >= self.garbled_from)

    def _write(self, idx: int, topic: int, meta: dict[str, Any], marks: Marks) -> np.ndarray:
        """The source's token and the body: filler with the topic's keywords (in the variant spelling, maybe) and
        a confusing keyword; then the transcription's losses and the truncation."""
        rng = self._rng(idx, 3)
        body = rng.integers(FIRST_FILLER, FIRST_KEYWORD, size=int(rng.integers(BODY_LENGTH[0], BODY_LENGTH[1] + 1)))
        count = int(rng.integers(KEYWORDS[0], KEYWORDS[1] + 1))
        places = rng.choice(len(body), size=count + 1, replace=False)
        spelling = FIRST_KEYWORD + (PER_CLASS * len(self.CLASS_NAMES) if marks.variant else 0)
        body[places[:count]] = spelling + PER_CLASS * topic + rng.integers(PER_CLASS, size=count)
        if rng.random() < CONFUSER_PROB:
            body[places[count]] = FIRST_KEYWORD + PER_CLASS * other_class(rng, topic, self.num_classes) \
                + int(rng.integers(PER_CLASS))
        if marks.above:
            lost = places[:count][rng.random(count) < GARBLED_LOSS]
            body[lost] = rng.integers(FIRST_FILLER, FIRST_KEYWORD, size=len(lost))
        if marks.category:
            body = body[:TRUNCATED_LENGTH]
        return np.concatenate([[1 + SOURCES.index(meta["source"])], body])

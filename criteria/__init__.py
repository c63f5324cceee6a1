"""Training losses: callables ``criterion(outputs, labels) -> scalar loss``."""

from criteria.cross_entropy_criterion import CrossEntropyCriterion
from criteria.mask_criterion import PromptedMaskCriterion

__all__ = ["CrossEntropyCriterion", "PromptedMaskCriterion"]

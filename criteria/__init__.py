"""Training losses: callables ``criterion(outputs, labels) -> scalar loss``."""

from criteria.cross_entropy_criterion import CrossEntropyCriterion

__all__ = ["CrossEntropyCriterion"]

from runners.evaluators.base_evaluator import BaseEvaluator

__all__ = ["BaseEvaluator"]

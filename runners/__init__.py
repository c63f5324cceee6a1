"""Runners: ``BaseTrainer`` trains and validates, ``BaseEvaluator`` evaluates a checkpoint."""

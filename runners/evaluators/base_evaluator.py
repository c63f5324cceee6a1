"""``BaseEvaluator``: load a checkpoint, evaluate a dataset, always capture debug outputs.

Its work dir's layout: ``run_dir`` (the package's docstring).
"""

from __future__ import annotations

import os
from typing import Any

from run_dir import RunDir
from run_dir.names import CHECKPOINT_FILE, EVALUATION_SCORES_FILE, EVALUATOR_LOG, PROGRESS_FILE
from runners.base_runner import BaseRunner, write_scores
from runners.checkpoints import load_checkpoint_file, load_model_state
from runners.config_keys import EVALUATOR_KEYS
from runners.hooks import EvalPass
from utils.atomic_files import read_json
from utils.errors import CheckpointError


class BaseEvaluator(BaseRunner):
    """Evaluate ``config['checkpoint']`` (a file, or a trainer's work dir) on ``eval_dataset``."""

    REQUIRED_KEYS = ("model", "metric", "eval_dataset")
    CONFIG_KEYS = EVALUATOR_KEYS
    LOG_FILE = EVALUATOR_LOG
    EVAL_DATASET_KEY = "eval_dataset"
    FINISHED_WORK_FILE = EVALUATION_SCORES_FILE

    def _init_components_(self) -> None:
        self._init_device_()
        self._init_work_dir_()
        self._init_logger()
        self._init_determinism_()
        self.eval_dataloader = self._build_dataloader("eval_dataset", "eval_dataloader", self._eval_sampler)
        self._init_metric_()
        self._init_model_()
        self._load_checkpoint_()
        self._init_debugger()

    def _load_checkpoint_(self) -> None:
        source = self.config.get("checkpoint")
        if source is None:
            self.logger.warning("config has no 'checkpoint': evaluating the freshly initialised model")
            return
        path = resolve_checkpoint(str(source))
        load_model_state(self.model, load_checkpoint_file(path)["model_state_dict"], path)
        self.logger.info(f"Loaded {path}")

    def run(self) -> None:
        self._init_components_()
        try:
            self._before_run()
            self.stage = "evaluation"
            eval_pass = EvalPass(self.work_dir, self.eval_dataloader.dataset)
            scores = self._eval_loop(self.eval_dataloader, "eval", eval_pass)
            self._check_work_dir("write the evaluation scores")
            if self.is_main:
                write_scores(os.path.join(self.work_dir, EVALUATION_SCORES_FILE), scores)
            self.hooks.call("after_run", self)
        finally:
            self._close()
        summary = ", ".join(f"{k} {v:.4f}" for k, v in scores["aggregated"].items())
        self.logger.info(f"Evaluation: {summary}; results in {os.path.abspath(self.work_dir)}")


def resolve_checkpoint(source: str) -> str:
    """A checkpoint file, or a trainer work dir (its best epoch's checkpoint, else the latest)."""
    if os.path.isfile(source):
        return source
    run = RunDir(source)
    if not os.path.isfile(run.progress):
        raise CheckpointError(
            f"checkpoint {source!r} is neither a checkpoint file nor a trainer work dir with {PROGRESS_FILE}; "
            "train first (python main.py --config-filepath configs/examples/cnn_trainer.py) or fix the path"
        )
    progress: dict[str, Any] = read_json(run.progress)
    for epoch in (progress.get("best_epoch"), progress["completed_epochs"] - 1):
        if epoch is not None and os.path.isfile(path := run.epoch(epoch).checkpoint):
            return path
    raise CheckpointError(f"no {CHECKPOINT_FILE} found in {source!r} for its best or latest epoch; train it again")

"""The runner's hooks: a user's own hook from the config sees every call of a real (small) run, in the documented
order; a hook may veto a training step's update; a config entry that is no hook is refused; and ``Hooks`` calls
only what a hook overrides, closing every hook even after one raised."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator

import pytest
import torch

from runners.config_file import load_config
from runners.evaluators import BaseEvaluator
from runners.hooks import Hooks, RunnerHook
from runners.trainers import BaseTrainer
from utils.errors import ConfigError


class Recorder(RunnerHook):
    """Records each call, with what the run holds at that moment."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def before_run(self, runner):
        self.calls.append("before_run")

    def before_train_epoch(self, runner, epoch):
        self.calls.append(f"before_train_epoch {epoch}")

    def before_optimizer_step(self, runner, batch, loss, scaler):
        self.calls.append(f"before_optimizer_step loss {'finite' if torch.isfinite(loss) else 'NaN'}")
        return True

    def after_train_step(self, runner, batch):
        self.calls.append("after_train_step")

    def after_train_epoch(self, runner, epoch):
        self.calls.append(f"after_train_epoch {epoch}")

    def before_eval_epoch(self, runner, eval_pass):
        self.calls.append(f"before_eval_epoch {eval_pass.epoch} in {os.path.basename(eval_pass.dir)}")

    def before_eval_batch(self, runner, batch):
        self.calls.append(f"before_eval_batch of {len(batch['meta_info']['idx'])}")

    @contextlib.contextmanager
    def eval_forward(self, runner, batch) -> Iterator[None]:
        self.calls.append("eval_forward enter")
        yield
        self.calls.append(f"eval_forward exit with {sorted(batch['outputs'])}")

    def after_eval_batch(self, runner, batch):
        self.calls.append(f"after_eval_batch with {sorted(batch['scores'])}")

    def after_eval_epoch(self, runner, eval_pass, scores):
        written = any(name.endswith("_scores.json") for name in os.listdir(eval_pass.dir))
        self.calls.append(f"after_eval_epoch of {len(scores['datapoint_idx'])}, scores file written: {written}")

    def after_epoch(self, runner, epoch):
        with open(os.path.join(runner.work_dir, "progress.json")) as progress:
            self.calls.append(f"after_epoch {epoch}, completed {json.load(progress)['completed_epochs']}")

    def after_run(self, runner):
        self.calls.append("after_run")

    def close(self, runner):
        self.calls.append("close")


SCORES = "['accuracy', 'cross_entropy', 'predicted_class', 'true_class_confidence']"


def eval_pass_calls(epoch, folder, batches):
    batch = ["before_eval_batch of 8", "eval_forward enter", "eval_forward exit with ['logits']",
             f"after_eval_batch with {SCORES}"]
    return [f"before_eval_epoch {epoch} in {folder}", *batch * batches,
            f"after_eval_epoch of {8 * batches}, scores file written: False"]


def epoch_calls(epoch):
    step = ["before_optimizer_step loss finite", "after_train_step"]
    return [f"before_train_epoch {epoch}", *step * 2, f"after_train_epoch {epoch}", *eval_pass_calls(epoch,
            f"epoch_{epoch}", 2), f"after_epoch {epoch}, completed {epoch + 1}"]


def test_a_hook_from_the_config_sees_a_trainer_s_and_an_evaluator_s_calls_in_order(tiny_config, tmp_path):
    config = load_config(tiny_config(epochs=2, train_size=32, val_size=16))
    config["hooks"] = [{"class": Recorder, "args": {}}]
    trainer = BaseTrainer(config)
    trainer.run()
    assert trainer.hooks.hooks[-1].calls == ["before_run", *epoch_calls(0), *epoch_calls(1), "after_run", "close"]

    evaluation = {key: config[key] for key in ("model", "metric", "hooks")}
    evaluation.update(work_dir=str(tmp_path / "eval"), checkpoint=config["work_dir"],
                      eval_dataset=config["val_dataset"], eval_dataloader=config["val_dataloader"])
    evaluator = BaseEvaluator(evaluation)
    evaluator.run()
    assert evaluator.hooks.hooks[-1].calls == ["before_run", *eval_pass_calls(None, "eval", 2), "after_run", "close"]


class NoUpdates(RunnerHook):
    def before_optimizer_step(self, runner, batch, loss, scaler):
        return False


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step()` before `optimizer.step()`")
def test_a_hook_that_says_no_to_every_step_leaves_the_weights_as_they_started(tiny_config):
    config = load_config(tiny_config(epochs=1, train_size=32, val_size=8))
    config["hooks"] = [{"class": NoUpdates, "args": {}}]
    trainer = BaseTrainer(config)
    trainer.run()
    torch.manual_seed(config["seed"])
    untrained = config["model"]["class"](**config["model"]["args"])
    trained = torch.load(os.path.join(config["work_dir"], "epoch_0", "checkpoint.pt"))["model_state_dict"]
    for name, parameter in untrained.named_parameters():
        torch.testing.assert_close(trained[name], parameter.detach(), rtol=0, atol=0)


@pytest.mark.parametrize("hooks, message", [
    ([{"class": torch.nn.ReLU, "args": {}}], r"config\['hooks'\]\[0\] must build a RunnerHook \(from runners.hooks "
                                             r"import RunnerHook\), got ReLU"),
    ({"class": Recorder, "args": {}}, r"config\['hooks'\] must be a list of \{'class': \.\.\., 'args': \{\.\.\.\}\} "
                                      r"entries \(your own hooks"),
])
def test_a_hooks_entry_that_builds_no_hook_is_refused_before_anything_runs(tiny_config, hooks, message):
    config = load_config(tiny_config(epochs=1))
    config["hooks"] = hooks
    with pytest.raises(ConfigError, match=message):
        BaseTrainer(config).run()
    assert not os.path.exists(os.path.join(config["work_dir"], "epoch_0"))


class Closing(RunnerHook):
    def __init__(self, closed: list[str], name: str, fails: bool = False) -> None:
        self.closed, self.name, self.fails = closed, name, fails

    def close(self, runner):
        self.closed.append(self.name)
        if self.fails:
            raise RuntimeError(f"{self.name} failed to close")


def test_every_hook_is_closed_even_after_one_raised_and_the_first_error_is_raised():
    closed: list[str] = []
    hooks = Hooks([Closing(closed, "a", fails=True), RunnerHook(), Closing(closed, "b", fails=True),
                   Closing(closed, "c")])
    with pytest.raises(RuntimeError, match="a failed to close"):
        hooks.close(None)
    assert closed == ["a", "b", "c"]


def test_a_step_is_applied_unless_a_hook_says_no_and_every_hook_is_asked():
    asked: list[str] = []

    class Answer(RunnerHook):
        def __init__(self, name: str, answer: bool) -> None:
            self.name, self.answer = name, answer

        def before_optimizer_step(self, runner, batch, loss, scaler):
            asked.append(self.name)
            return self.answer

    assert Hooks([Answer("a", True), RunnerHook()]).before_optimizer_step(None, {}, None, None)
    assert not Hooks([Answer("b", False), Answer("c", True)]).before_optimizer_step(None, {}, None, None)
    assert asked == ["a", "b", "c"]

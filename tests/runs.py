"""Tiny but real runs for tests: config files written like a user's, and main.py in a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from runners.config_file import load_config
from runners.trainers import BaseTrainer

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TINY_CONFIG = """
import torch
from torch.utils.data import DataLoader

from criteria import CrossEntropyCriterion
from data.datasets import SyntheticShapesDataset, collate_datapoints
from metrics import ClassificationMetric
from models import SmallCNN
from runners.trainers import BaseTrainer
from debuggers.wrappers.sequential_debugger import SequentialDebugger

config = {{
    "runner": BaseTrainer,
    "work_dir": {work_dir!r},
    "seed": 3,
    "epochs": {epochs},
    "checkpoint_method": {checkpoint_method!r},
    "train_dataset": {{"class": SyntheticShapesDataset,
                       "args": {{"num_datapoints": {train_size}, "resolution": 16, "split": "train"}}}},
    "train_dataloader": {{"class": DataLoader, "args": {{"batch_size": 16, "collate_fn": collate_datapoints}}}},
    "val_dataset": {{"class": SyntheticShapesDataset,
                     "args": {{"num_datapoints": {val_size}, "resolution": 16, "split": "val"}}}},
    "val_dataloader": {{"class": DataLoader, "args": {{"batch_size": {val_batch}, "collate_fn": collate_datapoints}}}},
    "model": {{"class": SmallCNN, "args": {{"widths": (8, 8, 16, 16)}}}},
    "criterion": {{"class": CrossEntropyCriterion, "args": {{}}}},
    "metric": {{"class": ClassificationMetric, "args": {{}}}},
    "optimizer": {{"class": torch.optim.SGD, "args": {{"lr": 0.05, "momentum": 0.9}}}},
    "scheduler": {{"class": torch.optim.lr_scheduler.StepLR, "args": {{"step_size": 1, "gamma": 0.7}}}},
}}
{extra}
"""


def write_config(path, work_dir, epochs=2, checkpoint_method="latest", train_size=64, val_size=24,
                 val_batch=8, extra=""):
    """Write a tiny trainer config file; ``extra`` is appended Python (e.g. a debugger entry)."""
    path.write_text(TINY_CONFIG.format(
        work_dir=str(work_dir), epochs=epochs, checkpoint_method=checkpoint_method, train_size=train_size,
        val_size=val_size, val_batch=val_batch, extra=textwrap.dedent(extra)))
    return str(path)


def run_main(config_path, timeout=240, cwd=REPO_ROOT, **kwargs):
    """``python main.py --config-filepath ...`` in a real subprocess (from ``cwd``: relative logs/ go there)."""
    return subprocess.run([sys.executable, os.path.join(REPO_ROOT, "main.py"), "--config-filepath",
                           str(config_path)], cwd=cwd, capture_output=True, text=True, timeout=timeout, **kwargs)


def start_main(config_path, started, timeout=200) -> subprocess.Popen:
    """``python main.py --config-filepath ...`` started in a real subprocess, returned once the file ``started``
    exists (the config's code creates it at the moment the test waits for); an error if the process ends first or
    ``timeout`` passes."""
    process = subprocess.Popen([sys.executable, "main.py", "--config-filepath", str(config_path)], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while not os.path.exists(started):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"main.py did not get to {started}: {process.communicate()}")
        time.sleep(0.1)
    return process


def run_torchrun(config_path, nproc=2, timeout=180):
    """``torchrun --standalone --nproc_per_node=N main.py ...`` with one thread per process.

    torchrun runs in its own session so that a timeout kills its workers too, not only torchrun. A worker that
    aborts (SIGABRT, SIGSEGV) prints every thread's Python stack (``PYTHONFAULTHANDLER``), so a rare native crash
    seen once in CI says where each thread was.
    """
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "main.py", "--config-filepath", str(config_path)]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1")
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise AssertionError(f"torchrun did not finish within {timeout} s (a hang?); its output:\n{output}") from None
    return subprocess.CompletedProcess(command, process.returncode, output, "")


@contextmanager
def one_thread() -> Iterator[None]:
    """One intra-op thread inside: on a busy 2-core machine, two OpenMP threads per process spin against each
    other (a run that takes 40 s of CPU took 10 minutes with two)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train(config_path):
    """Train the config file's run in this process; returns its work dir."""
    config = load_config(config_path)
    BaseTrainer(config).run()
    return config["work_dir"]

"""Helpers for the ready-made debuggers' tests: real SequentialDebugger epochs read back from real pages."""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import threading
import time
import traceback
from contextlib import contextmanager

import numpy as np
import torch

from debuggers import capture
from debuggers.pages import file_format as page_format
from debuggers.wrappers.sequential_debugger import SequentialDebugger
from runners.eval_viewer.backend.initialization import load_debug_outputs


def entry(name, cls, **args):
    return {"name": name, "debugger_config": {"class": cls, "args": args}}


def make_batch(images, idx, labels=None):
    """A collated datapoint batch of ``images[idx]`` (labels default to idx % 6)."""
    idx = list(idx)
    labels = torch.tensor([i % 6 for i in idx]) if labels is None else labels[idx]
    return {"inputs": {"image": images[idx]}, "labels": {"class": labels}, "meta_info": {"idx": torch.tensor(idx)}}


def run_epoch(model, images, out_dir, batch_size, debuggers, labels=None, **debugger_args):
    """One 'validation epoch' over ``images`` under ``torch.no_grad()``; returns ``save_all``'s summary
    and what the pages hold."""
    batches = [make_batch(images, range(start, min(start + batch_size, len(images))), labels)
               for start in range(0, len(images), batch_size)]
    return run_batches(model, batches, out_dir, debuggers, **debugger_args)


def run_batches(model, batches, out_dir, debuggers, **debugger_args):
    """One 'validation epoch' over collated ``batches`` (with ``meta_info['idx']``), as the evaluator runs it:
    ``torch.no_grad()``, forward, debugger; returns ``save_all``'s summary and the pages read back."""
    return run_batches_with_columns(model, batches, out_dir, debuggers, **debugger_args)[:2]


def run_batches_with_columns(model, batches, out_dir, debuggers, **debugger_args):
    """``run_batches``, and the epoch table's summary columns it collected: ``{column: values in idx order}``."""
    debugger = SequentialDebugger(debuggers, model=model, **debugger_args)
    debugger.reset_buffer(str(out_dir / "debugger"))
    debugger.enabled = True
    with torch.no_grad():
        for batch in batches:
            dp = dict(batch)
            dp["outputs"] = model(dp["inputs"])
            debugger(dp, model)
    summary = debugger.save_all(str(out_dir / "debugger"))
    debugger.close()
    columns = {name: values[np.argsort(idx)] for name, (idx, values) in debugger.summaries.concatenated().items()}
    return summary, load_debug_outputs(str(out_dir)), columns


def capture_epoch(model, images, out_dir, batch_size, debuggers, labels=None, **debugger_args):
    """What the pages of ``run_epoch`` hold."""
    return run_epoch(model, images, out_dir, batch_size, debuggers, labels, **debugger_args)[1]


def leftover_hooks(model) -> int:
    """Forward, pre-forward and backward hooks on every module, plus capture listeners."""
    return len(capture._listeners) + sum(
        len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
        + len(m._backward_pre_hooks) for m in model.modules())


def exit_code_in_forked_child(check, timeout_s=30.0) -> int:
    """Run ``check()`` in a child forked now; its exit code: 0 when it returned True, 1 when False, 2 when it
    raised. A child still running after ``timeout_s`` (hung) is killed: -9."""
    pid = os.fork()
    if pid == 0:
        try:
            code = 0 if check() else 1
        except BaseException:
            traceback.print_exc()
            code = 2
        os._exit(code)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return -signal.SIGKILL


def wait_until(condition, timeout_s=30.0) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.001)


@contextmanager
def held_by_another_thread(lock):
    """``lock`` held by another thread for the duration of the block (as by a thread caught at a fork)."""
    holding, done = threading.Event(), threading.Event()

    def hold():
        with lock:
            holding.set()
            done.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(30), "the other thread did not get the lock"
        yield
    finally:
        done.set()
        holder.join(30)


def resident_blocks(path: str) -> np.ndarray:
    """Which 4 KiB blocks of ``path`` are in the page cache (``mincore`` of a mapping of it)."""
    size = os.path.getsize(path)
    with open(path, "rb") as file, mmap.mmap(file.fileno(), size, prot=mmap.PROT_READ) as mapping:
        view = np.frombuffer(mapping, np.uint8)
        resident = resident_pages(view.ctypes.data, size)
        del view
    return resident


def resident_pages(address: int, nbytes: int) -> np.ndarray:
    """Which pages of the memory at ``address`` (a page's start) are in RAM (``mincore``)."""
    libc = ctypes.CDLL(None, use_errno=True)
    vector = np.zeros(-(-nbytes // mmap.PAGESIZE), np.uint8)
    status = libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(nbytes), vector.ctypes.data_as(ctypes.c_void_p))
    assert status == 0, os.strerror(ctypes.get_errno())
    return vector & 1 == 1


def page_table(path: str) -> np.ndarray:
    """A sealed page's own ``LOCATION`` rows (its footer)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return page_format.read_footer(fd, os.fstat(fd).st_size, path)
    finally:
        os.close(fd)

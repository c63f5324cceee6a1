"""A dataset's or collate function's error naming the datapoint it failed on, in one line.

An exception in a dataset's ``__getitem__`` reaches the user as a DataLoader traceback (from a worker process: a
traceback inside the message of another) that names no datapoint unless the user's own message does. The runner
builds its dataloaders on ``DatapointErrors`` and ``CollateErrors``, so that such an error stops the run with one
line, ``config['train_dataset'] (MyDataset), dataset[17] (file /data/017.png): ValueError: ...``, and the traceback
goes to the run's log. A dataset says which file a datapoint comes from with a method ``datapoint_file(idx)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.utils.data import Dataset

from utils.errors import DatasetItemError, LanternUserError, describe_exception
from utils.ops import idx_list

FILE_METHOD = "datapoint_file"  # a dataset's optional method: the file datapoint idx is read from


class DatapointErrors(Dataset):
    """``dataset`` (map-style) whose ``__getitem__`` errors name the index, and the file where the dataset says one;
    every other attribute is the dataset's own."""

    def __init__(self, dataset: Any, where: str) -> None:
        self.dataset = dataset
        self.where = where  # "config['train_dataset'] (MyDataset)"

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, idx: Any) -> Any:
        try:
            return self.dataset[idx]
        except LanternUserError:
            raise
        except Exception as exc:  # the project's __getitem__: one line naming the datapoint, the traceback logged
            raise DatasetItemError(f"{self.where}, dataset[{idx}]{_file_of(self.dataset, idx)}: "
                                   f"{describe_exception(exc)}") from exc

    def __getattr__(self, name: str) -> Any:
        if name == "dataset":  # not set yet: a copy being made in a worker
            raise AttributeError(name)
        return getattr(self.dataset, name)


class CollateErrors:
    """``collate_fn`` whose errors name the batch's datapoints by their ``meta_info['idx']``."""

    def __init__(self, collate_fn: Callable[[list], Any], where: str) -> None:
        self.collate_fn = collate_fn
        self.where = where  # "config['train_dataloader']"

    def __call__(self, datapoints: Any) -> Any:
        try:
            return self.collate_fn(datapoints)
        except LanternUserError:  # collate_datapoints' own refusals name the datapoint and the contract
            raise
        except Exception as exc:
            name = getattr(self.collate_fn, "__name__", type(self.collate_fn).__name__)
            raise DatasetItemError(f"{self.where}'s collate_fn ({name}) failed on the batch of datapoints "
                                   f"{_batch_idx(datapoints)}: {describe_exception(exc)}") from exc


def _file_of(dataset: Any, idx: Any) -> str:
    method = getattr(dataset, FILE_METHOD, None)
    if not callable(method):
        return ""
    try:
        return f" (file {method(idx)})"
    except Exception:  # the error being reported matters more than the file's name
        return ""


def _batch_idx(datapoints: Any) -> str:
    """``idx [3, 4, 5]`` from the datapoints' meta info, or how many there were where they have none."""
    try:
        return f"idx {[i for dp in datapoints for i in idx_list(dp['meta_info']['idx'])]}"
    except Exception:  # the datapoints are not Lantern's (the collate_fn is the project's own)
        return f"of {len(datapoints)} item(s)" if hasattr(datapoints, "__len__") else "given"

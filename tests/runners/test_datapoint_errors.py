"""A dataset's or collate function's error mid-epoch stops the run in one line naming the datapoint (its index, the
file where the dataset says one), in the main process and from a DataLoader worker alike; the traceback is in the
log (runners/datapoint_errors.py)."""

from __future__ import annotations

import pytest
import torch

from data.datasets import collate_datapoints
from runners.datapoint_errors import CollateErrors, DatapointErrors
from tests.runs import run_main, write_config
from utils.errors import DatasetContractError, DatasetItemError

FLAKY = """
class Flaky(SyntheticShapesDataset):
    def __getitem__(self, i):
        if i == 17:
            raise ValueError("corrupt image header")
        return super().__getitem__(i)

    def datapoint_file(self, i):
        return f"/data/shapes/{i:04d}.png"


config["val_dataset"]["class"] = Flaky
config["val_dataloader"]["args"]["num_workers"] = WORKERS
"""


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("workers", [pytest.param(0, id="main_process"),
                                     pytest.param(1, id="worker", marks=pytest.mark.slow)])
def test_a_dataset_raising_mid_epoch_names_the_index_and_the_file_in_one_line(tmp_path, workers):
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=1, extra=FLAKY.replace("WORKERS", str(workers)))
    result = run_main(path)
    assert result.returncode == 2, result.stderr
    line = error_line(result.stderr)
    assert line.startswith("error: config['val_dataset'] (Flaky), dataset[17] (file /data/shapes/0017.png): "
                           "ValueError: corrupt image header"), line
    log = (tmp_path / "w" / "train.log").read_text()
    assert 'raise ValueError("corrupt image header")' in log  # the traceback, where the user's code raised
    assert log.rstrip().splitlines()[-1].endswith("ValueError: corrupt image header")
    assert "stopped during epoch 0 validation (exit code 2)" in log.rstrip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_collate_fn_raising_names_the_batchs_datapoints(tmp_path):
    path = write_config(tmp_path / "c.py", tmp_path / "w", epochs=1, extra="""
def picky_collate(datapoints):
    if any(dp["meta_info"]["idx"] == 21 for dp in datapoints):
        raise KeyError("no such field")
    return collate_datapoints(datapoints)


config["val_dataloader"]["args"]["collate_fn"] = picky_collate
config["val_dataloader"]["args"]["num_workers"] = 1
""")
    result = run_main(path)
    assert result.returncode == 2, result.stderr
    assert error_line(result.stderr).startswith(
        "error: config['val_dataloader']'s collate_fn (picky_collate) failed on the batch of datapoints idx [16, 17, "
        "18, 19, 20, 21, 22, 23]: KeyError: 'no such field'")


class Numbers(torch.utils.data.Dataset):
    def __init__(self, shapes):
        self.shapes = shapes
        self.class_names = ["a", "b"]

    def __len__(self):
        return len(self.shapes)

    def __getitem__(self, i):
        return {"inputs": {"x": torch.zeros(self.shapes[i])}, "labels": {"class": 0}, "meta_info": {"idx": i}}


def test_the_wrappers_keep_the_dataset_and_refusals_of_the_contract_as_they_are():
    dataset = DatapointErrors(Numbers([(3,), (3,), (4,)]), "config['val_dataset'] (Numbers)")
    assert len(dataset) == 3 and dataset.class_names == ["a", "b"]  # its own attributes
    with pytest.raises(DatasetItemError, match=r"^config\['val_dataset'\] \(Numbers\), dataset\[7\]: IndexError"):
        dataset[7]
    collate = CollateErrors(collate_datapoints, "config['val_dataloader']")
    with pytest.raises(DatasetContractError, match=r"inputs\['x'\] cannot be stacked into a batch: datapoint idx=2 "
                                                   r"gives shape \(4,\), the batch's first \(idx=0\) \(3,\)"):
        collate([dataset[0], dataset[1], dataset[2]])

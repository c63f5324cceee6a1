"""``--trust-configs`` never imports a config file that a run folder holds, even as a link to a file elsewhere.

Before: ``run_info.json`` naming ``<run>/config.py``, a symbolic link to a script outside the run, passed the check
(which looked at the resolved path only): the script was imported and ran, and the refusal, if any, came after.
Now the path is checked as named and as resolved, before anything is imported. Whether the script ran is told by
the file it writes when imported.
"""

from __future__ import annotations

import json
import os

import pytest

from runners.eval_viewer.shared.datasets import DatasetUnavailable, build_run_dataset
from runners.eval_viewer.shared.runs import Run
from runners.run_model import EpochModel
from utils.errors import ConfigError


@pytest.fixture
def linked_run(tmp_path):
    """A run folder whose run_info.json names ``<run>/config.py``, a link to a script outside every log folder
    (and a run folder linked to from the project: ``configs/linked.py`` pointing into the run)."""
    marker = tmp_path / "imported"
    script = tmp_path / "project" / "evil_config.py"
    script.parent.mkdir()
    script.write_text(f"open({str(marker)!r}, 'w').close()\nconfig = {{'val_dataset': {{}}}}\n")
    run = tmp_path / "logs" / "run"
    (run / "epoch_0").mkdir(parents=True)
    os.symlink(script, run / "config.py")
    (run / "run_info.json").write_text(json.dumps({"runner": "BaseTrainer", "config_filepath": str(run / "config.py")}))
    return run, marker


def test_verify_refuses_a_config_linked_into_the_run_before_importing_it(linked_run):
    run, marker = linked_run
    with pytest.raises(ConfigError, match="lies inside the run folder"):
        EpochModel.rebuild(str(run / "epoch_0"), trust_configs=True)
    assert not marker.exists()


def test_the_viewer_refuses_a_config_linked_into_the_run_before_importing_it(linked_run):
    run, marker = linked_run
    described = Run(str(run), "run", "BaseTrainer", str(run / "config.py"))
    with pytest.raises(DatasetUnavailable, match="lies inside the log folder"):
        build_run_dataset(described, [str(run.parent)])
    assert not marker.exists()


def test_a_project_config_linked_to_a_file_in_a_run_folder_is_refused_too(linked_run, tmp_path):
    """The other way round (already refused before, kept): a link in the project into the run folder."""
    run, marker = linked_run
    inside = run / "planted.py"
    inside.write_text((tmp_path / "project" / "evil_config.py").read_text())
    link = tmp_path / "project" / "linked.py"
    os.symlink(inside, link)
    (run / "run_info.json").write_text(json.dumps({"runner": "BaseTrainer", "config_filepath": str(link)}))
    with pytest.raises(ConfigError, match="lies inside the run folder"):
        EpochModel.rebuild(str(run / "epoch_0"), trust_configs=True)
    with pytest.raises(DatasetUnavailable, match="lies inside the log folder"):
        build_run_dataset(Run(str(run), "run", "BaseTrainer", str(link)), [str(run.parent)])
    assert not marker.exists()

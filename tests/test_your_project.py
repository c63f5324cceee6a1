"""docs/your_project.md as a user follows it: its files copied into a folder outside the repository, trained
with main.py, opened with the viewer's backend."""

from __future__ import annotations

import os
import re

import pytest

from runners.eval_viewer.backend.datapoint import load_datapoint
from runners.eval_viewer.backend.viewer import ViewerBackend
from tests.runs import REPO_ROOT, run_main

GUIDE = os.path.join(REPO_ROOT, "docs", "your_project.md")
FILE_BLOCK = re.compile(r"```python\n# myproj/(\w+\.py)\n(.*?)```", re.DOTALL)


def write_guide_project(folder) -> dict[str, str]:
    """The guide's ``# myproj/<file>`` code blocks written to ``folder/myproj``; returns them by file name."""
    with open(GUIDE) as f:
        files = dict(FILE_BLOCK.findall(f.read()))
    project = folder / "myproj"
    project.mkdir()
    (project / "__init__.py").write_text("")
    for name, code in files.items():
        (project / name).write_text(code)
    return files


@pytest.mark.timeout(300)
def test_the_guide_project_trains_captures_and_opens_in_the_viewer(tmp_path):
    files = write_guide_project(tmp_path)
    assert {"data.py", "utils.py", "models.py", "probes.py", "config.py"} <= set(files)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = run_main(os.path.join("myproj", "config.py"), cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    work_dir = tmp_path / "logs" / "myproj" / "config"
    assert (work_dir / "epoch_5" / "checkpoint.pt").is_file()  # the config's last epoch

    backend = ViewerBackend([str(tmp_path / "logs")])
    run = backend.run(str(work_dir))
    assert run is not None, backend.discovery.problems
    epoch = next(e for e in backend.epochs(run) if e.has_debug)
    datapoint = load_datapoint(backend, run, epoch, 5)
    assert "dataset_error" not in datapoint, datapoint["dataset_error"]
    assert datapoint["inputs"]["image"].shape == (1, 16, 16)
    assert datapoint["meta_info"]["quadrant"] in ("top left", "top right", "bottom left", "bottom right")
    assert datapoint["debug"]["channel_means"]["channel_mean"].shape == (16,)
    assert datapoint["debug"]["gradcam"] is not None
    assert set(datapoint["scores"]) >= {"accuracy", "cross_entropy"}

"""docs/your_project.md as a user follows it: its files copied into a folder outside the repository, trained with
main.py from the folder that holds the project; what the page says the run prints, reaches and finds is checked
against what it really prints, reaches and finds; the run is opened with the viewer's backend."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import pytest

from runners.eval_viewer.shared.backend import ViewerBackend
from runners.eval_viewer.shared.datapoint import load_datapoint
from tests.runs import REPO_ROOT, run_main

pytestmark = pytest.mark.slow  # trains the guide's project: runs in .ci/run's second command (README: the slow tests)

GUIDE = os.path.join(REPO_ROOT, "docs", "your_project.md")
FILE_BLOCK = re.compile(r"```python\n# myproj/(\w+\.py)\n(.*?)```", re.DOTALL)
TEXT_BLOCK = re.compile(r"```text\n(.*?)```", re.DOTALL)
BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)
ACCURACY_CLAIM = re.compile(r"\((\d\.\d+) validation accuracy\)")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
PAGE_FOLDER = "/path/to"  # how the page writes the folder the user runs from


def page() -> str:
    with open(GUIDE, encoding="utf-8") as f:
        return f.read()


def write_guide_project(folder) -> dict[str, str]:
    """The guide's ``# myproj/<file>`` code blocks written to ``folder/myproj``; returns them by file name."""
    files = dict(FILE_BLOCK.findall(page()))
    project = folder / "myproj"
    project.mkdir()
    (project / "__init__.py").write_text("")
    for name, code in files.items():
        (project / name).write_text(code)
    return files


def shown_output(starting: str) -> list[str]:
    """The lines of the page's ``text`` block that starts with ``starting`` (what the page says a command prints),
    without blank ones."""
    [block] = [block for block in TEXT_BLOCK.findall(page()) if block.startswith(starting)]
    return [line for line in block.splitlines() if line.strip()]


def printed_as_shown(shown: str, printed: list[str]) -> bool:
    """Whether a printed line ends with the ``shown`` line, its numbers within 15% or 0.03 of the page's (another
    CPU may round a datapoint the other way; a drift such as 0.56 for 0.93 is caught)."""
    pattern = re.compile("".join(re.escape(part) if i % 2 == 0 else r"(-?\d+(?:\.\d+)?)"
                                 for i, part in enumerate(re.split(r"(-?\d+(?:\.\d+)?)", shown))) + "$")
    expected = [float(number) for number in NUMBER.findall(shown)]
    for line in printed:
        match = pattern.search(line)
        if match and all(math.isclose(float(got), want, rel_tol=0.15, abs_tol=0.03)
                         for got, want in zip(match.groups(), expected)):
            return True
    return False


@pytest.fixture(scope="module")
def guide_run(tmp_path_factory):
    """The page's project trained as the page says, from the folder that holds it: (that folder, the page's files,
    the finished process)."""
    folder = tmp_path_factory.mktemp("user")
    files = write_guide_project(folder)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return folder, files, run_main(os.path.join("myproj", "config.py"), cwd=folder, env=env, timeout=300)


@pytest.mark.timeout(360)
def test_the_guide_project_prints_and_reaches_what_the_page_says(guide_run):
    folder, files, result = guide_run
    assert {"data.py", "utils.py", "models.py", "probes.py", "config.py"} <= set(files)
    assert result.returncode == 0, result.stderr
    printed = (result.stderr + result.stdout).splitlines()
    for line in shown_output("INFO epoch 5: validation accuracy"):
        assert printed_as_shown(line.replace(PAGE_FOLDER, str(folder)), printed), (line, printed[-5:])
    with open(folder / "logs" / "myproj" / "config" / "epoch_5" / "validation_scores.json") as f:
        reached = json.load(f)["aggregated"]["accuracy"]
    claimed = float(ACCURACY_CLAIM.search(files["config.py"]).group(1))
    assert math.isclose(reached, claimed, abs_tol=0.03), f"the config's comment claims {claimed}, it reached {reached}"
    [hint] = [line.removeprefix("Look at them: ") for line in printed if line.startswith("Look at them: ")]
    assert any(hint in block for block in BASH_BLOCK.findall(page().split("## Viewing")[1])), hint


@pytest.mark.timeout(360)
def test_the_analysis_finds_what_the_page_says(guide_run):
    folder, _, result = guide_run
    assert result.returncode == 0, result.stderr
    analysis = subprocess.run([sys.executable, "-m", "runners.analyze", "--run", "logs/myproj/config"], cwd=folder,
                              env=dict(os.environ, PYTHONPATH=REPO_ROOT), capture_output=True, text=True, timeout=120)
    assert analysis.returncode == 0, analysis.stderr
    printed = analysis.stdout.splitlines()
    for line in shown_output("failures: "):
        assert printed_as_shown(line, printed), (line, analysis.stdout)


@pytest.mark.timeout(360)
def test_the_guide_run_opens_in_the_viewer(guide_run):
    folder, _, result = guide_run
    assert result.returncode == 0, result.stderr
    work_dir = folder / "logs" / "myproj" / "config"
    assert (work_dir / "epoch_5" / "checkpoint.pt").is_file()  # the config's last epoch
    backend = ViewerBackend([str(folder / "logs")])
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


@pytest.mark.timeout(360)
def test_run_from_inside_the_package_the_results_stay_beside_it(guide_run):
    """The same command from inside ``myproj/`` finds the same finished run beside the package and writes no
    ``logs/`` among the modules; the viewer hint names that folder."""
    folder, _, result = guide_run
    assert result.returncode == 0, result.stderr
    again = run_main("config.py", cwd=folder / "myproj", timeout=300)
    assert again.returncode == 0, again.stderr
    assert "All 6 epochs are already done" in again.stderr
    assert not (folder / "myproj" / "logs").exists()
    results = folder / "logs" / "myproj"
    assert f"Results are in {results / 'config'}\n" in again.stdout
    assert f"Look at them: python -m runners.eval_viewer --log-dirs {results}\n" in again.stdout


def python_block(containing: str) -> str:
    """The page's one ``python`` block (without a ``# myproj/`` header) that holds ``containing``."""
    [block] = [block for block in re.findall(r"```python\n(.*?)```", page(), re.DOTALL) if containing in block]
    return block


@pytest.mark.timeout(360)
def test_the_model_outside_lantern_snippet_loads_a_checkpoint_the_run_kept(guide_run):
    folder, _, result = guide_run
    assert result.returncode == 0, result.stderr
    snippet = python_block("model.load_state_dict(torch.load(")
    check = snippet + "\nprint(sum(p.numel() for p in model.parameters()))\n"
    ran = subprocess.run([sys.executable, "-c", check], cwd=folder, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert int(ran.stdout.split()[-1]) > 0


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_the_plain_version_of_the_model_trains_to_the_same_scores(guide_run):
    """'Your model as it is': the page's PlainQuadrantNet in the config's model entry and nothing else changed; from
    the same seed it is the same network, so it reaches the dict model's scores exactly."""
    folder, files, result = guide_run
    assert result.returncode == 0, result.stderr
    plain = python_block("class PlainQuadrantNet")
    (folder / "myproj" / "plain_config.py").write_text(
        "import torch\nfrom torch import nn\n\nfrom .utils import conv_block\n" + files["config.py"] + "\n\n" + plain)
    again = run_main(os.path.join("myproj", "plain_config.py"), cwd=folder, timeout=300,
                     env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert again.returncode == 0, again.stderr
    scores = {}
    for name in ("config", "plain_config"):
        with open(folder / "logs" / "myproj" / name / "epoch_5" / "validation_scores.json") as f:
            scores[name] = json.load(f)["aggregated"]
    assert scores["plain_config"] == pytest.approx(scores["config"])

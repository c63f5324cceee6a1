"""A project outside the repository: its modules are found without PYTHONPATH, and never stand in for
Lantern's packages (real ``main.py`` and ``python -m runners.eval_viewer`` processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.runs import REPO_ROOT, run_main, write_config

NET = """
import torch
from models import SmallCNN


class WideCNN(SmallCNN):
    pass
"""


def _without_pythonpath() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_a_plain_project_folder_runs_from_anywhere_without_pythonpath(tmp_path):
    project = tmp_path / "myproj"
    project.mkdir()
    (project / "mynet.py").write_text(NET)
    write_config(project / "config.py", "unused", epochs=1, extra="""
        from mynet import WideCNN
        config["model"] = {"class": WideCNN, "args": {"widths": (8, 8, 16, 16)}}
        del config["work_dir"]
    """)
    result = run_main(project / "config.py", cwd=tmp_path, env=_without_pythonpath())
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "logs" / "myproj" / "config" / "epoch_0" / "checkpoint.pt").is_file()


def test_a_module_named_like_a_lantern_package_is_refused_naming_what_to_rename(tmp_path):
    project = tmp_path / "myproj"
    project.mkdir()
    (project / "models.py").write_text(NET)
    write_config(project / "config.py", tmp_path / "w", extra="from models import WideCNN\n")
    result = run_main(project / "config.py", env=_without_pythonpath())
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{project / 'models.py'} has the same name as Lantern's package(s) ['models']" in result.stderr
    assert "myproj_models.py" in result.stderr and "__init__.py" in result.stderr
    assert not (tmp_path / "w").exists()


def test_the_viewer_started_in_a_folder_with_a_utils_py_uses_lantern_s_utils(tmp_path):
    (tmp_path / "utils.py").write_text("def helper():\n    return 1\n")
    (tmp_path / "models.py").write_text("")
    result = subprocess.run([sys.executable, "-m", "runners.eval_viewer", "--help"], cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=REPO_ROOT), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--log-dirs" in result.stdout


def test_a_project_package_named_like_a_lantern_package_is_refused(tmp_path):
    package = tmp_path / "models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write_config(package / "config.py", tmp_path / "w")
    result = run_main(package / "config.py")
    assert result.returncode == 2
    assert f"the project package {package} is named like Lantern's package 'models'" in result.stderr


def test_the_package_last_loaded_wins_when_two_projects_share_a_name(tmp_path):
    """The viewer loads configs of several projects in one process; each gets its own modules."""
    from runners.config_file import load_config

    for clone, classes in (("a", 4), ("b", 5)):
        package = tmp_path / clone / "sameproj"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "settings.py").write_text(f"CLASSES = {classes}\n")
        (package / "config.py").write_text(textwrap.dedent("""
            from .settings import CLASSES
            config = {"classes": CLASSES}
        """))
    assert load_config(str(tmp_path / "a" / "sameproj" / "config.py"))["classes"] == 4
    assert load_config(str(tmp_path / "b" / "sameproj" / "config.py"))["classes"] == 5
    assert load_config(str(tmp_path / "a" / "sameproj" / "config.py"))["classes"] == 4


def test_a_numpy_py_in_the_current_folder_is_not_imported(tmp_path):
    """``python -m`` puts the current folder first on the import path: ``cd RUN && python -m runners.analyze
    --run .`` imported a run folder's numpy.py. The folder now comes after the installed packages."""
    (tmp_path / "numpy.py").write_text("raise SystemExit('the numpy.py of the current folder was imported')\n")
    result = subprocess.run([sys.executable, "-m", "runners.analyze", "--run", "."], cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=REPO_ROOT), capture_output=True, text=True, timeout=120)
    assert "current folder was imported" not in result.stderr
    assert result.returncode == 2 and "holds no epoch table" in result.stderr

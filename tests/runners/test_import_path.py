"""A project outside the repository: its modules are found without PYTHONPATH, and never stand in for
Lantern's packages (real ``main.py`` and ``python -m runners.eval_viewer`` processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.runs import REPO_ROOT, run_main, write_config

pytestmark = pytest.mark.slow  # runs in .ci/run's second command (README: the slow tests)

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


USES_TOYSEQ = """
    from toyseq.nets import WideCNN
    config["model"] = {"class": WideCNN, "args": {"widths": (8, 8, 16, 16)}}
    del config["work_dir"]
"""


def _research_repository(root):
    """Most research repositories' layout: a package, and configs/ (and a data/ of scripts) without __init__.py."""
    (root / "toyseq").mkdir(parents=True)
    (root / "toyseq" / "__init__.py").write_text("")
    (root / "toyseq" / "nets.py").write_text(NET)
    (root / "data").mkdir()
    (root / "data" / "prepare.py").write_text("raise SystemExit('a script, never imported')\n")
    (root / "configs").mkdir()
    return write_config(root / "configs" / "exp.py", "unused", epochs=1, train_size=16, val_size=8, extra=USES_TOYSEQ)


def test_configs_beside_the_package_import_it_run_from_the_root(tmp_path):
    """``python lantern/main.py --config-filepath configs/exp.py`` from the root: ModuleNotFoundError before."""
    root = tmp_path / "repo"
    _research_repository(root)
    result = run_main(os.path.join("configs", "exp.py"), cwd=root, env=_without_pythonpath())
    assert result.returncode == 0, result.stderr
    assert (root / "logs" / "repo" / "exp" / "epoch_0" / "checkpoint.pt").is_file()
    assert "Look at them: python -m runners.eval_viewer --log-dirs logs/repo\n" in result.stdout


def test_configs_beside_the_package_import_it_run_from_elsewhere(tmp_path):
    """The project folder that holds configs/ is on the import path too; results go under the folder run from."""
    config = _research_repository(tmp_path / "repo")
    (tmp_path / "scratch").mkdir()
    result = run_main(config, cwd=tmp_path / "scratch", env=_without_pythonpath())
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "scratch" / "logs" / "repo" / "exp" / "epoch_0" / "checkpoint.pt").is_file()


def test_a_plain_configs_folder_inside_the_package_imports_it_by_name(tmp_path):
    """``myproj/configs/exp.py`` without an ``__init__.py`` in configs/: the project root is above the package."""
    package = tmp_path / "code" / "toyseq"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "nets.py").write_text(NET)
    (package / "configs").mkdir()
    config = write_config(package / "configs" / "exp.py", "unused", epochs=1, train_size=16, val_size=8,
                          extra=USES_TOYSEQ)
    result = run_main(config, cwd=tmp_path, env=_without_pythonpath())
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "logs" / "toyseq" / "exp" / "epoch_0" / "checkpoint.pt").is_file()


def test_a_package_of_the_root_named_like_a_lantern_package_is_explained_when_imported(tmp_path):
    """The root's own configs/ and data/ are no obstacle (the layout above runs); importing its models/ package,
    which Lantern's models/ hides, says so instead of "No module named 'models.nets'"."""
    root = tmp_path / "repo"
    (root / "models").mkdir(parents=True)
    (root / "models" / "__init__.py").write_text("")
    (root / "models" / "nets.py").write_text(NET)
    (root / "configs").mkdir()
    config = write_config(root / "configs" / "exp.py", tmp_path / "w", extra="from models.nets import WideCNN\n")
    result = run_main(os.path.join("configs", "exp.py"), cwd=root, env=_without_pythonpath())
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert (f"error: config file 'configs/exp.py': No module named 'models.nets' (at {config}:" in result.stderr)
    assert f"{root / 'models'}{os.sep} is named like Lantern's package 'models', and Python imports Lantern's" \
        in result.stderr and "models -> my_models" in result.stderr


def test_a_module_found_nowhere_says_where_lantern_looked(tmp_path):
    root = tmp_path / "repo"
    (root / "configs").mkdir(parents=True)
    config = write_config(root / "configs" / "exp.py", tmp_path / "w", extra="import toyseqq\n")
    (tmp_path / "scratch").mkdir()
    result = run_main(config, cwd=tmp_path / "scratch", env=_without_pythonpath())
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"No module named 'toyseqq' (at {config}:" in result.stderr
    assert (f"imported from {root / 'configs'}, {root}, {tmp_path / 'scratch'} (the config's folder, the project "
            "folder holding configs/, the folder you run from) and PYTHONPATH: run from the folder that holds "
            "'toyseqq', or install it if it is a package") in result.stderr

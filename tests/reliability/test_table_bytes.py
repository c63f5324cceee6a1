"""Every table cell the viewer or the analysis reads is bounded in bytes, not only in count.

Before: a 0.1 MB zstd ``epoch_table.parquet`` holding 600 identical 4 MB strings passed the row and value-count
bounds; one 100-row page of the viewer's table answered 400 MB (the viewer peaked at 2.9 GB) and ``analyze`` peaked
at 4.3 GB. Now such a table is refused on opening, with one line naming the column, before any value is decoded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.epoch_table import ROLES_KEY, EpochTable, write_epoch_table
from run_dir.errors import EpochTableFileError
from run_dir.table_file import MAX_TEXT_BYTES
from runners.eval_viewer.table.ids import TABLE, TABLE_CAPTION, TABLE_QUERY, TABLE_ROWS
from tests.e2e.synthetic_runs import write_table_run
from tests.reliability.viewer_server import call_callback, serve_viewer
from tests.runs import REPO_ROOT

ROLES = {"scores": ["accuracy"], "higher_is_better": {"accuracy": True}, "meta": ["site"]}
MB = 1024 * 1024
pytestmark = pytest.mark.slow  # tables of hundreds of MB: runs in .ci/run's second command (README: the slow tests)


def write_bomb(path: str, rows: int, text: str, **options) -> None:
    """An epoch table whose meta column ``site`` holds ``text`` in every row (zstd: a few KB on disk)."""
    label = np.arange(rows) % 3
    table = pa.table({"idx": np.arange(rows), "label": label, "prediction": label, "accuracy": np.ones(rows),
                      "site": pa.array([text] * rows)})
    pq.write_table(table.replace_schema_metadata({ROLES_KEY: json.dumps(ROLES)}), path, compression="zstd",
                   **options)


BOMBS = {  # name: (rows, text, writer options, what the message says)
    "600 identical 4 MB strings (the report's)": (600, "x" * (4 * MB), {}, "bytes uncompressed"),
    "the same, plainly encoded": (600, "x" * (4 * MB), {"use_dictionary": False}, "bytes uncompressed"),
    "one 200 KB string in a dictionary": (2000, "y" * (200 * 1024), {"dictionary_pagesize_limit": 64 * MB},
                                          f"a value of {200 * 1024} bytes"),
    "one 60 KB string repeated to 120 MB": (2000, "z" * (60 * 1024), {"dictionary_pagesize_limit": 64 * MB},
                                            f"{2000 * 60 * 1024} bytes of text"),
}


@pytest.mark.parametrize("kind", list(BOMBS))
def test_a_table_of_huge_cells_is_refused_naming_the_column(tmp_path, kind):
    rows, text, options, expected = BOMBS[kind]
    path = str(tmp_path / "epoch_table.parquet")
    write_bomb(path, rows, text, **options)
    assert os.path.getsize(path) < MB
    with pytest.raises(EpochTableFileError) as raised:
        EpochTable(path)
    assert "column 'site' holds" in str(raised.value) and expected in str(raised.value)


def test_strings_up_to_the_bound_are_read(tmp_path):
    path = str(tmp_path / "epoch_table.parquet")
    site = np.array(["a" * MAX_TEXT_BYTES, "b", "c"] * 10, dtype=object)
    write_epoch_table(path, {"idx": np.arange(30), "accuracy": np.ones(30), "site": site}, ROLES)
    assert list(EpochTable(path).arrays(["site"])["site"]) == list(site)


PEAK = """
import resource, sys
from runners.analyze import main
code = main(["--run", sys.argv[1]])
print(code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def _analyze_peak_mb(run: str) -> tuple[int, int, str]:
    done = subprocess.run([sys.executable, "-c", PEAK, run], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    code, peak = done.stdout.split()[-2:]
    return int(code), int(peak), done.stderr


def test_analyze_refuses_it_in_one_line_at_the_memory_of_a_small_table(tmp_path):
    """The peak of ``runners.analyze`` on the report's table against its peak on a table of the same rows with a
    short string: within 100 MB (it was 4.3 GB)."""
    rows, text, options, _ = BOMBS["600 identical 4 MB strings (the report's)"]
    write_bomb(str(tmp_path / "epoch_table.parquet"), rows, text, **options)
    code, bomb_peak, stderr = _analyze_peak_mb(str(tmp_path))
    assert code == 2 and stderr.count("\n") == 1 and "column 'site' holds" in stderr
    small = tmp_path / "small"
    small.mkdir()
    write_bomb(str(small / "epoch_table.parquet"), rows, "x")
    code, small_peak, _ = _analyze_peak_mb(str(small))
    assert code == 0 and bomb_peak < small_peak + 100


def test_the_viewer_s_table_answers_the_message_not_400_mb(tmp_path):
    folder = tmp_path / "logs"
    run = write_table_run(str(folder), "run", np.arange(10.0) % 3, np.arange(10) % 3, np.linspace(0.1, 1.0, 10))
    rows, text, options, _ = BOMBS["600 identical 4 MB strings (the report's)"]
    write_bomb(os.path.join(run, "epoch_0", "epoch_table.parquet"), rows, text, **options)
    with serve_viewer([str(folder)], views_dir=str(tmp_path / "views")) as url:
        query = {"run": run, "epoch": "epoch_0", "metric": "accuracy", "version": None, "idx": None}
        status, body = call_callback(url, f"{TABLE_ROWS}.data", {
            f"{TABLE}.getRowsRequest": {"startRow": 0, "endRow": 100}, f"{TABLE_QUERY}.data": query})
    assert status == 200 and len(body) < MB
    caption = json.loads(body)["response"][TABLE_CAPTION]["children"]
    assert "column 'site' holds" in caption and "bytes uncompressed" in caption

"""Rewrite a debugger folder of Lantern's previous page format (1) in the current format (2).

    python -m debuggers.pages.convert logs/run/epoch_3/debugger [--page-size-mb 100]

The format-1 pages are read with the safe, bounded loader of ``debuggers.pages.legacy``
(nothing from them runs) and written again by ``PageWriter`` into a sibling folder, which
then takes the old folder's place; the old folder is kept as ``<folder>.format1`` until
you delete it. Only the pages the old index names are read, by plain names inside the folder.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys

from debuggers.pages.errors import CorruptPageError, DebugDataError
from debuggers.pages.file_format import INDEX_GLOB, load_page, open_regular
from debuggers.pages.index import write_index
from debuggers.pages.legacy import LEGACY_INDEX_VERSION
from debuggers.pages.writer import PageWriter
from utils.folder_glob import glob_in

_PAGE_NAME = re.compile(r"page_(?:rank\d+_)?\d+\.pkl")


def read_legacy_index(path: str) -> dict:
    """A format-1 index, with every page name checked to be a plain page name inside the folder."""
    with open(open_regular(path, "debug index"), encoding="utf-8") as f:
        try:
            index = json.load(f)
        except ValueError as exc:
            raise CorruptPageError(f"debug index {path} is not valid JSON ({exc})") from None
    valid = (isinstance(index, dict) and index.get("version") == LEGACY_INDEX_VERSION
             and type(index.get("rank")) is int and type(index.get("world_size")) is int
             and type(index.get("complete")) is bool and isinstance(index.get("datapoints"), dict)
             and all(isinstance(name, str) and _PAGE_NAME.fullmatch(name) for name in index["datapoints"].values()))
    if not valid:
        raise CorruptPageError(f"debug index {path} is not a well-formed format-1 Lantern index (page names must "
                               "be plain names like page_3.pkl); it cannot be converted")
    return index


def convert(debugger_dir: str, page_size_mb: float = 100) -> str:
    """Convert ``debugger_dir`` in place (the old one kept beside it); returns the backup folder's path."""
    debugger_dir = os.path.normpath(debugger_dir)
    backup, target = debugger_dir + ".format1", debugger_dir + ".converting"
    if os.path.exists(backup):
        raise FileExistsError(f"{backup} already exists: a conversion ran before; delete it to convert again")
    shutil.rmtree(target, ignore_errors=True)
    for index_path in glob_in(debugger_dir, INDEX_GLOB):
        index = read_legacy_index(index_path)
        with PageWriter(max(1, int(page_size_mb * 2**20)), rank=index["rank"],
                        world_size=index["world_size"]) as writer:
            writer.start_epoch(target)
            by_page: dict[str, list[int]] = {}
            for idx, name in index["datapoints"].items():
                by_page.setdefault(name, []).append(int(idx))
            for name, indices in sorted(by_page.items()):
                page = load_page(os.path.join(debugger_dir, name))
                for idx in sorted(indices):
                    writer.add(idx, page[idx])
            writer.flush()
        if not index["complete"]:
            converted = os.path.join(target, os.path.basename(index_path))
            with open(converted, encoding="utf-8") as f:
                write_index(converted, {**json.load(f), "complete": False})
    os.rename(debugger_dir, backup)
    os.rename(target, debugger_dir)
    return backup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("debugger_dir", help="a debugger/ folder written by an earlier Lantern")
    parser.add_argument("--page-size-mb", type=float, default=100)
    args = parser.parse_args(argv)
    try:
        backup = convert(args.debugger_dir, args.page_size_mb)
    except (DebugDataError, OSError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"converted {args.debugger_dir}; the previous pages are in {backup} (delete it when done)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

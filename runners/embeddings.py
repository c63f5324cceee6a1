"""Compute and store the 2-D maps of an epoch's feature spaces, which the viewer's Embeddings tab draws.

    python -m runners.embeddings --run logs/examples/digits_trainer [--epoch N] [--space KEY ...] [--method auto]

Each map is the projection of one space (``analysis/feature_spaces.py``: ``debugger:<name>``, ``summaries``,
``probabilities``; every space of the epoch by default) by ``analysis/projection.py``, stored in the epoch's folder
(``run_dir/embedding_file.py``). The viewer runs this command for a map the first time it is shown, in a process of
its own; run it yourself to have a large epoch's maps ready. A run or space it cannot map gives one line on stderr
and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Optional

from analysis.epoch_table import EpochTable
from analysis.failures import resolve_epoch_dir
from analysis.feature_spaces import epoch_spaces, find_space, sample_outputs, space_vectors
from analysis.projection import METHODS, project
from run_dir import EpochDir
from run_dir.embedding_file import EmbeddingMap, embedding_path, write_embedding
from run_dir.findings_file import outputs_signature
from utils.errors import LanternUserError


def compute_map(epoch_dir: str, key: str, method: str = "auto", out: Optional[str] = None) -> EmbeddingMap:
    """The map of the space ``key`` of the epoch in ``epoch_dir``, stored at ``out`` (default: in the epoch's
    folder)."""
    signature = outputs_signature(epoch_dir)  # before reading: an epoch rewritten meanwhile leaves the map stale
    table = EpochTable(EpochDir(epoch_dir).table)
    space = find_space(epoch_spaces(table, sample_outputs(epoch_dir)), key)
    idx, vectors = space_vectors(epoch_dir, table, space)
    started = time.monotonic()
    found = project(idx, vectors, method, space.standardise)
    stored = EmbeddingMap(found.idx, found.xy, found.components, {
        "space": space.key, "label": space.label, "method": found.method, "datapoints": len(found.idx),
        "dims": int(vectors.shape[1]) if vectors.ndim == 2 else 0, "components": int(found.components.shape[1]),
        "explained": round(found.explained, 4), "left_out": found.left_out, "signature": signature,
        "seconds": round(time.monotonic() - started, 2)})
    write_embedding(out or embedding_path(epoch_dir, space.key), stored)
    return stored


def describe(stored: EmbeddingMap) -> str:
    """``UMAP of 598 datapoints (64 dims, 50 principal components keep 97% of its variance)``."""
    about = stored.about
    left_out = f"; {about['left_out']} left out (NaN or Inf)" if about.get("left_out") else ""
    return (f"{'UMAP' if about.get('method') == 'umap' else 'PCA'} of {about.get('datapoints')} datapoints "
            f"({about.get('dims')} dims, {about.get('components')} principal components keep "
            f"{about.get('explained', 0):.0%} of its variance{left_out})")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runners.embeddings", description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a trainer or evaluator work dir (or one epoch_N folder)")
    parser.add_argument("--epoch", type=int, default=None,
                        help="the epoch (default: the last one with captured debug outputs, else the last)")
    parser.add_argument("--space", nargs="*", default=None, metavar="KEY",
                        help="the spaces to map (default: every space of the epoch)")
    parser.add_argument("--method", choices=METHODS, default="auto",
                        help="umap (umap-learn, the maps extra), pca, or auto: UMAP where installed (default)")
    parser.add_argument("--out", default=None, help="where to store the map (one space only; default: the epoch's "
                                                    "folder, where the viewer finds it)")
    args = parser.parse_args(argv)
    try:
        epoch_dir = resolve_epoch_dir(args.run, args.epoch)
        keys = args.space or [space.key for space in epoch_spaces(EpochTable(EpochDir(epoch_dir).table),
                                                                  sample_outputs(epoch_dir))]
        if args.out and len(keys) != 1:
            raise LanternUserError(f"--out stores one map; name one space with --space (the epoch's: {keys})")
        for key in keys:
            print(f"{key}: {describe(compute_map(epoch_dir, key, args.method, args.out))}", flush=True)
    except LanternUserError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

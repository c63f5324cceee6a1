"""An epoch's stored 2-D maps (``embeddings/<digest>.parquet``): one feature space of the epoch projected to two
dimensions, computed once (``runners.embeddings``) and read by the viewer's Embeddings tab on every draw.

A file holds one space's map: ``idx`` (int64), ``x`` and ``y`` (float32), and ``components`` (float32 lists: the
space's leading principal components, where a datapoint's nearest neighbours are sought), with what it was computed
from in its metadata (``EmbeddingMap.about``: the space, the method, the epoch's signature...). Its name is a digest
of the space's key, never the key itself: a debugger's name is text from a config, and no text becomes a path. It
is written atomically and read as the epoch table is (a regular file, never a link, no more rows than its bytes can
hold); a map whose epoch changed since it was computed (another ``signature``) is stale and not returned.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from run_dir.errors import RunFileError
from run_dir.folder import EpochDir
from run_dir.run_files import open_regular, refuse_link
from run_dir.table_file import read_checked_schema
from utils.atomic_files import atomic_write

ABOUT_KEY = b"lantern.embedding"
FORMAT = 1  # bumped when a field changes meaning: older maps are then computed again, not misread
_TYPES = {"idx": pa.int64(), "x": pa.float32(), "y": pa.float32()}


@dataclass
class EmbeddingMap:
    """One feature space of an epoch drawn in 2-D: a row per datapoint whose vector could be used, in idx order."""

    idx: np.ndarray  # int64
    xy: np.ndarray  # (n, 2) float32
    components: np.ndarray  # (n, c) float32
    about: dict[str, Any] = field(default_factory=dict)  # space, label, method, dims, explained, signature, ...


def embedding_path(epoch_dir: str, space: str) -> str:
    """Where the map of ``space`` (a space's key) of the epoch in ``epoch_dir`` is stored."""
    return os.path.join(EpochDir(epoch_dir).embeddings, hashlib.sha256(space.encode()).hexdigest()[:24] + ".parquet")


def write_embedding(path: str, found: EmbeddingMap) -> None:
    """``found`` as the file ``path``, atomically; its folder is made (never through a link)."""
    folder = os.path.dirname(path)
    os.makedirs(refuse_link(folder, "embeddings folder"), exist_ok=True)
    components = np.ascontiguousarray(found.components, dtype=np.float32)
    table = pa.table({"idx": pa.array(found.idx.astype(np.int64)), "x": pa.array(found.xy[:, 0].astype(np.float32)),
                      "y": pa.array(found.xy[:, 1].astype(np.float32)),
                      "components": pa.FixedSizeListArray.from_arrays(pa.array(components.reshape(-1)),
                                                                      max(components.shape[1], 1))})
    table = table.replace_schema_metadata({ABOUT_KEY: json.dumps({**found.about, "format": FORMAT})})
    atomic_write(path, lambda temp: pq.write_table(table, temp, compression="snappy"))


def read_embedding(path: str, space: str, signature: Any) -> Optional[EmbeddingMap]:
    """The map stored at ``path`` when it is of ``space`` and was computed from the epoch as it is now
    (``signature``); None when none is stored or it is stale. ``RunFileError`` when the file is not one Lantern
    wrote (a link, a special file, damaged, another shape)."""
    try:
        fd = open_regular(path, "embedding map")
    except FileNotFoundError:
        return None
    with open(fd, "rb") as file:
        schema = read_checked_schema(fd, path)
        about = _about(schema, path)
        if about.get("format") != FORMAT or about.get("space") != space or about.get("signature") != signature:
            return None
        try:
            table = pq.read_table(file)
        except (OSError, pa.ArrowException) as exc:
            raise RunFileError(f"embedding map {path} cannot be read ({exc}); remove it (the viewer computes it "
                               "again)") from None
    if any(column.null_count for column in table.columns):
        raise RunFileError(f"embedding map {path} holds empty values, which Lantern never writes; remove it (the "
                           "viewer computes it again)")
    return EmbeddingMap(table.column("idx").to_numpy(), np.stack([table.column("x").to_numpy(),
                                                                  table.column("y").to_numpy()], axis=1),
                        _components(table, len(table)), about)


def _about(schema: pa.Schema, path: str) -> dict[str, Any]:
    """The map's metadata, once its columns are those Lantern writes."""
    kinds = {name: schema.field(name).type for name in schema.names}
    components = kinds.get("components")
    if any(kinds.get(name) != kind for name, kind in _TYPES.items()) or components is None or not (
            pa.types.is_fixed_size_list(components) and components.value_type == pa.float32()):
        raise RunFileError(f"embedding map {path} does not hold the columns Lantern writes (idx, x, y, components); "
                           "remove it (the viewer computes it again)")
    try:
        about = json.loads((schema.metadata or {}).get(ABOUT_KEY, b"{}"))
    except ValueError:
        about = None
    return about if isinstance(about, dict) else {}


def _components(table: pa.Table, rows: int) -> np.ndarray:
    column = table.column("components").combine_chunks()
    return column.flatten().to_numpy().reshape(rows, column.type.list_size)

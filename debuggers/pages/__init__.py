r"""The page format: how debug outputs go to disk while an epoch is validated, and how one datapoint is read back.

A trainer's ``epoch_N/debugger/`` (an evaluator's ``debugger/``) holds, per rank::

    page_0.pkl, page_1.pkl, ...   pages of at most ``page_size_mb``; each loads with pickle.load / joblib.load as
                                  {datapoint_idx: {debugger_name: output}} (on files you trust)
    index.json                    small, rewritten atomically after every page: version, rank, world_size,
                                  complete, pages, datapoints, sorted
    locations.bin                 32-byte rows (idx, record start, header offset, header length, page)

A page is a pickle whose records each set ``page[idx] = outputs`` and carry a JSON header listing every array's
offset, dtype and shape. Lantern's reader never unpickles: it finds the idx's row in ``locations.bin`` (binary
search), parses that record's small header (bounded: ``encoding.MAX_HEADER_NODES``) and reads each array's bytes
with ``os.preadv``. A page is written
under a temporary name and renamed when sealed, so it is complete or absent, even after SIGKILL; a crafted
page runs no code, and its reads are bounded by its own bytes. Byte-level layout: ``file_format``.

The modules, in the order data flows through them:

- ``values``, ``batch_values``: what a debugger's output may hold (dicts, lists, numbers, arrays) and the rows
  of a batch; ``host_copies``: device outputs copied to the host once per batch.
- ``keep_policy``: which datapoints of an epoch get full outputs (``keep``: all, failing, past a threshold,
  the worst k).
- ``encoding``: records (one datapoint, or a batch of one structure) as pickle opcodes and headers.
- ``file_format``: the page file, its footer and trailer, ``load_page`` / ``read_record``.
- ``index``: the index and locations files; ``writer``: ``PageWriter``, the background thread that appends
  records, seals pages and updates the index, never holding more than a bounded amount in memory;
  ``buffer_pool``: reusable buffers for big captures; ``watchdog``: a page write that stalls ends the epoch's
  capture, never the run.
- ``reader``: ``load_debug_outputs(epoch_dir)`` (re-exported at the seed's place,
  ``runners.eval_viewer.backend.initialization``).
- ``legacy``, ``pickle_pages`` and ``convert``: format-1 pages (read safely) and Pylon's joblib pickles (never
  opened, unless the user trusts them: ``--trust-pickles``), rewritten once.

The rest of a run folder (where the pages' folder lies, the run's other files, the disk budget that removes old
epochs' pages) is ``run_dir``'s; each page file is opened as every run file is (``run_dir.run_files.open_regular``,
no link followed, no special file opened), refused with this package's ``CorruptPageError``. This package imports
no debugger: the debuggers and ``SequentialDebugger`` import it.
"""

r"""The run folder: every file and folder a run writes, where it lies, and how it is read back as data.

A trainer's work dir::

    run_info.json                 which config the run belongs to, and the launch that wrote it
    progress.json                 epochs done, the best epoch; written last in an epoch (a run resumes after it)
    .lantern.lock                 held by the running process (``runners.work_dir_guard``)
    train.log, train_rank<r>.log  the log of rank 0, and of the other ranks (``run_log``)
    training_monitor.bin          with config['training_monitor'] (``monitor_file``, ``training_log``)
    tensorboard/                  with config['training_monitor']['tensorboard']: TensorBoard's event files
    profiler_trace.json.gz        with config['profiler']: torch.profiler's trace of the chosen steps
    profiler_summary.json         and the ops that took the most time in them (``profiler_summary``)
    model_report.json             the model's layers and parameters, for the viewer
    datapoints/                   each validation datapoint's inputs, labels, meta info, for the viewer
    epoch_N/training_losses.pt    each training step's loss
    epoch_N/validation_scores.json
    epoch_N/epoch_table.parquet   one row per validation datapoint (``table_file``, ``analysis.epoch_table``)
    epoch_N/findings.json         the failure analysis of the epoch (``findings_file``)
    epoch_N/debugger/             the debug pages, at checkpoint epochs with a debugger (``debuggers.pages``)
    epoch_N/debugger_removed.json instead, once debug_disk_budget_gb removed them (``budget``)
    epoch_N/checkpoint.pt         kept for checkpoint epochs, the latest and the best

An evaluator's work dir is its only epoch: run_info.json, .lantern.lock, eval.log (eval_rank<r>.log),
model_report.json, datapoints/, and in the folder itself evaluation_scores.json, epoch_table.parquet,
findings.json and debugger/.

The modules: ``names`` (each name above, once), ``folder`` (``RunDir`` and ``EpochDir``: the paths, the epochs and
what each holds, the epoch to use when none is given), ``run_files`` (safe opening and JSON reading: no link
followed, no special file opened, sizes capped; whether a path lies inside a folder, through links or not),
``errors`` (``RunFileError`` and its family, each naming its file), ``budget``, ``monitor_file`` and
``training_log``, ``table_file``, ``findings_file``, ``run_log``, ``saved_views`` (the viewer's own files of named
views, kept outside every run folder), and ``profiler_summary``.
"""

from run_dir.folder import EpochDir, RunDir

__all__ = ["EpochDir", "RunDir"]

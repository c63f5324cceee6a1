"""Runners: ``BaseTrainer`` trains and validates, ``BaseEvaluator`` evaluates a checkpoint.

Importing this package first makes sure Lantern's own packages win over a project's same-named modules in
the current folder or on ``PYTHONPATH``, and installed packages over the current folder's modules (see
``runners/import_path.py``): every ``python -m runners...`` command imports it before anything else.
"""

from runners.import_path import put_current_folder_last, put_lantern_first

put_current_folder_last()
put_lantern_first()

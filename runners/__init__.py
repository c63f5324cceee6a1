"""Runners: ``BaseTrainer`` trains and validates, ``BaseEvaluator`` evaluates a checkpoint.

Importing this package first makes sure Lantern's own packages win over a project's same-named modules in
the current folder or on ``PYTHONPATH`` (see ``runners/import_path.py``): every ``python -m runners...``
command imports it before anything else of Lantern.
"""

from runners.import_path import put_lantern_first

put_lantern_first()

"""Run a Lantern config: ``python main.py --config-filepath configs/examples/cnn_trainer.py``.

The config module's ``config['runner']`` (``BaseTrainer`` or ``BaseEvaluator``)
is built with the config and run. Under ``torchrun`` every process runs this
same command; the runner joins the process group itself. Whatever stops a run is
said on stderr and at the end of its log, with the exit code (runners/run_stop.py).
"""

from __future__ import annotations

import argparse
import os
import sys

from runners.config_file import load_config, viewer_log_dir
from runners.run_stop import Terminated, raise_on_sigterm, report_stop
from utils import distributed
from utils.errors import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-filepath", required=True, help="Python file defining config = {...}")
    args = parser.parse_args(argv)
    config: dict = {}
    runner = None
    raise_on_sigterm()
    try:
        config = load_config(args.config_filepath)
        runner_cls = config.get("runner")
        if not callable(runner_cls):
            raise ConfigError(
                f"{args.config_filepath}: config['runner'] must be a runner class such as BaseTrainer or "
                f"BaseEvaluator, got {runner_cls!r}"
            )
        runner = runner_cls(config)
        runner.run()
    except (Exception, KeyboardInterrupt, SystemExit, Terminated) as exc:  # every stop is said, in the log too
        return report_stop(exc, config, runner)
    distributed.shutdown()
    if os.environ.get("RANK", "0") == "0":
        print(f"Results are in {os.path.abspath(config['work_dir'])}\n"
              f"Look at them: python -m runners.eval_viewer --log-dirs {viewer_log_dir(config)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

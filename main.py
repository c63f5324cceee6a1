"""Run a Lantern config: ``python main.py --config-filepath configs/examples/cnn_trainer.py``.

The config module's ``config['runner']`` (``BaseTrainer`` or ``BaseEvaluator``)
is built with the config and run. Under ``torchrun`` every process runs this
same command; the runner joins the process group itself.
"""

from __future__ import annotations

import argparse
import os
import sys

from runners.base_runner import BaseRunner
from runners.config_file import load_config
from utils import distributed
from utils.errors import ConfigError, LanternUserError, user_message


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-filepath", required=True, help="Python file defining config = {...}")
    args = parser.parse_args(argv)
    config: dict = {}
    runner = None
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
    except LanternUserError as exc:
        message = user_message(exc)
        rank = f" (rank {os.environ.get('RANK')})" if distributed.env_world_size() > 1 else ""
        print(f"error{rank}: {message}", file=sys.stderr)
        if isinstance(config.get("runner"), type) and issubclass(config["runner"], BaseRunner):
            config["runner"].log_stop(config, message, runner.launch if isinstance(runner, BaseRunner) else None)
        return 2
    distributed.shutdown()
    if os.environ.get("RANK", "0") == "0":
        print(f"Results are in {os.path.abspath(config['work_dir'])}\n"
              f"Look at them: python -m runners.eval_viewer --log-dirs {config['work_dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

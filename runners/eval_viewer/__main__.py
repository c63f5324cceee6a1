"""``python -m runners.eval_viewer --log-dirs logs/examples [more dirs] [--host 127.0.0.1] [--port 8050]``.

Listens on 127.0.0.1 unless ``--host`` says otherwise: the viewer shows model
internals and has no login, so exposing it to the network is an explicit choice.
"""

from __future__ import annotations

import argparse

from runners.eval_viewer.app import create_app


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m runners.eval_viewer",
                                     description="Browse Lantern runs, epochs, failing datapoints and their debug "
                                                 "outputs in a browser.")
    parser.add_argument("--log-dirs", nargs="+", required=True,
                        help="runs (folders with run_info.json) or folders holding runs, e.g. logs/examples")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1 only)")
    parser.add_argument("--port", type=int, default=8050)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    app = create_app(args.log_dirs)
    for problem in app.viewer_backend.discovery.problems:
        print(f"warning: {problem}")
    print(f"Lantern eval viewer: {len(app.viewer_backend.discovery.runs)} run(s); open http://{args.host}:{args.port}")
    app.run(host=args.host, port=args.port, debug=False)


if __name__ == "__main__":
    main()

"""``python -m runners.eval_viewer --log-dirs logs/examples [more dirs] [--host 127.0.0.1] [--port 8050]``.

Listens on 127.0.0.1 unless ``--host`` says otherwise: the viewer shows model
internals and has no login, so exposing it to the network is an explicit choice,
and it is warned about. The port is taken before the address is printed (a port
in use is an error, never a link to another program); ``--port 0`` picks a free one.
A run's inputs are shown from what the run captured; ``--trust-configs`` also lets
the viewer import the config files that runs name, to rebuild datasets they did not capture.
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys

from werkzeug.serving import BaseWSGIServer, make_server

from analysis.projection import METHODS
from run_dir.names import RUN_INFO_FILE
from runners.eval_viewer.app import create_app


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m runners.eval_viewer",
                                     description="Browse Lantern runs, epochs, failing datapoints and their debug "
                                                 "outputs in a browser.")
    parser.add_argument("--log-dirs", nargs="+", required=True,
                        help=f"runs (folders with {RUN_INFO_FILE}) or folders holding runs, e.g. logs/examples")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1 only)")
    parser.add_argument("--port", type=int, default=8050, help="port to listen on; 0 picks a free one")
    parser.add_argument("--trust-configs", action="store_true",
                        help="import the config file a run names to rebuild its dataset when the run did not "
                             "capture its inputs (runs code: only for runs you trust)")
    parser.add_argument("--views-dir", default=None,
                        help="the folder where the runs' named views are kept, one file per run "
                             "(default: ~/.config/lantern/viewer_views/)")
    parser.add_argument("--embedding-method", choices=METHODS, default="auto",
                        help="how the Embeddings tab maps a feature space: umap (umap-learn, the maps extra), pca "
                             "(seconds), or auto: UMAP where installed (default)")
    return parser.parse_args(argv)


def is_loopback(host: str) -> bool:
    """True when ``host`` only ever resolves to loopback addresses (127.0.0.0/8, ::1)."""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def network_warning(host: str) -> str:
    return (f"warning: --host {host} listens beyond this machine: anyone who can reach it on the network can read "
            "every run shown here (scores, datapoints, model internals); the viewer has no login. Use the default "
            "--host 127.0.0.1 and an SSH tunnel (ssh -L 8050:127.0.0.1:8050 this-machine) to browse from elsewhere")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    app = create_app(args.log_dirs, trust_configs=args.trust_configs, views_dir=args.views_dir,
                     embedding_method=args.embedding_method)
    for problem in app.viewer_backend.discovery.problems:
        print(f"warning: {problem}", flush=True)
    if not is_loopback(args.host):
        print(network_warning(args.host), file=sys.stderr, flush=True)
    try:
        server: BaseWSGIServer = make_server(args.host, args.port, app.server, threaded=True)
    except (OSError, SystemExit) as exc:  # werkzeug prints why (port in use, unknown address) and exits
        reason = f" ({exc})" if isinstance(exc, OSError) else ""
        print(f"error: cannot listen on {args.host}:{args.port}{reason}; another program may use that port. "
              "Pass another --port, or --port 0 to pick a free one", file=sys.stderr)
        return 2
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"Lantern eval viewer: {len(app.viewer_backend.discovery.runs)} run(s); "
          f"open http://{host}:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Render the README's screenshot of the eval viewer (``docs/images/viewer_datapoint.png``) from a real run.

Trains the default example (``configs/examples/cnn_trainer.py``) into a temporary folder, unless
``--run`` names a run already trained, serves the viewer on 127.0.0.1, opens the worst datapoint
of the latest epoch with debug outputs in headless Chromium and saves the page as it looks.

    python docs/render_viewer_screenshot.py [--run logs/examples/cnn_trainer] [--out docs/images/viewer_datapoint.png]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import threading

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from werkzeug.serving import make_server  # noqa: E402

from runners.config_file import load_config  # noqa: E402
from runners.eval_viewer.app import create_app  # noqa: E402
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL  # noqa: E402
from runners.eval_viewer.table.ids import TABLE  # noqa: E402
from runners.trainers import BaseTrainer  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def train_default_example(folder: str) -> str:
    config = load_config(os.path.join(REPO_ROOT, "configs", "examples", "cnn_trainer.py"))
    config["work_dir"] = os.path.join(folder, "cnn_trainer")
    BaseTrainer(config).run()
    return config["work_dir"]


def screenshot(run: str, out: str) -> None:
    from playwright.sync_api import sync_playwright

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server("127.0.0.1", 0, create_app([run]).server, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"http://127.0.0.1:{server.server_port}/")
            first = page.locator(f"#{TABLE} .ag-center-cols-container .ag-row[row-index='0'] [col-id='idx']")
            first.click()
            page.locator(f"#{DATAPOINT_PANEL} .section-debug-outputs .debugger-block").first.wait_for()
            page.wait_for_timeout(1500)  # let every figure finish drawing
            os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
            page.screenshot(path=out)
            browser.close()
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", help="a trained run to show (default: train the default example now)")
    parser.add_argument("--out", default=os.path.join(REPO_ROOT, "docs", "images", "viewer_datapoint.png"))
    args = parser.parse_args()
    if args.run:
        screenshot(args.run, args.out)
    else:
        with tempfile.TemporaryDirectory() as folder:
            screenshot(train_default_example(folder), args.out)
    print(f"screenshot written to {args.out}")


if __name__ == "__main__":
    main()

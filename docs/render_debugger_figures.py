"""Render one figure per ready-made debugger into docs/images/ (for docs/debuggers.md).

    python docs/render_debugger_figures.py

Captures come from real runs of every debugger on the demo models (trained weights
from logs/examples/cnn_trainer and attention_trainer when they exist, otherwise
fresh ones) on validation datapoints, through ``SequentialDebugger`` and pages,
then drawn through ``runners.eval_viewer.figures.registry`` and photographed in headless Chromium.
"""

from __future__ import annotations

import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from configs.examples.all_debuggers_trainer import config as cnn_tour  # noqa: E402
from configs.examples.attention_debuggers_trainer import config as attention_tour  # noqa: E402
from data.datasets import collate_datapoints  # noqa: E402
from debuggers.pages.reader import load_debug_outputs  # noqa: E402
from run_dir.names import DEBUGGER_DIR  # noqa: E402
from runners.checkpoints import load_checkpoint_file  # noqa: E402
from runners.eval_viewer.figures.base import display_image  # noqa: E402
from runners.eval_viewer.figures.context import DrawContext  # noqa: E402
from runners.eval_viewer.figures.registry import output_figures  # noqa: E402
from runners.evaluators.base_evaluator import resolve_checkpoint  # noqa: E402
from utils.builders import build_from_config  # noqa: E402
from utils.errors import CheckpointError  # noqa: E402

IMAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "images")
SHOWN = {  # debugger name in the tour config -> (image file, which of its figures)
    "layer4_features": [("feature_map", 0)], "layer3_stats": [("statistics", 0)],
    "layer1_output": [("layer_output", 0)], "gradcam_predicted": [("cam", 0)], "nan_origin": [("nan_origin", 0)],
    "gradient_flow": [("gradient_flow", 0)], "block1_attention": [("attention", 0), ("attention_patches", 1)],
    "captured": [("captured_states", 0)],
}
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def capture(config: dict, checkpoint_dir: str, folder: str, idx: int = 3) -> tuple[dict, torch.Tensor, dict]:
    """One batch of 8 validation datapoints through the config's debuggers; datapoint ``idx``'s outputs, its
    image and the dataset's class names (the viewer takes them from the epoch table)."""
    torch.manual_seed(0)
    model = build_from_config(config["model"]).eval()
    try:
        model.load_state_dict(load_checkpoint_file(resolve_checkpoint(checkpoint_dir))["model_state_dict"])
    except CheckpointError:
        print(f"no trained checkpoint in {checkpoint_dir}: drawing an untrained model")
    dataset = build_from_config(config["val_dataset"])
    dp = collate_datapoints([dataset[i] for i in range(8)])
    debugger = build_from_config(config["debugger"], model=model)
    debugger.reset_buffer(os.path.join(folder, DEBUGGER_DIR))
    debugger.enabled = True
    with torch.no_grad():
        dp["outputs"] = model(dp["inputs"])
        debugger(dp, model)
    debugger.save_all(os.path.join(folder, DEBUGGER_DIR))
    debugger.close()
    class_names = dict(enumerate(getattr(dataset, "CLASS_NAMES", ())))
    return load_debug_outputs(folder)[idx], dp["inputs"]["image"][idx], class_names


def main() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        figures = {}
        for config, run in ((cnn_tour, "cnn_trainer"), (attention_tour, "attention_trainer")):
            outputs, image, class_names = capture(config, os.path.join("logs", "examples", run),
                                                  os.path.join(tmp, run))
            for name, output in outputs.items():
                context = DrawContext(image=display_image(image.numpy()), class_names=class_names)
                drawn = output_figures(output, context) if name in SHOWN else []
                for file_name, index in SHOWN.get(name, []):
                    if file_name not in figures and index < len(drawn):
                        figures[file_name] = drawn[index]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": 760, "height": 600})
            for file_name, fig in figures.items():
                fig.update_layout(width=740)
                html_path = os.path.join(tmp, f"{file_name}.html")
                fig.write_html(html_path, include_plotlyjs=True, full_html=True)
                page.goto(f"file://{html_path}")
                page.wait_for_selector(".main-svg", timeout=30_000)
                page.locator(".js-plotly-plot").first.screenshot(path=os.path.join(IMAGES, f"debugger_{file_name}.png"))
                print(f"wrote docs/images/debugger_{file_name}.png")
            browser.close()


if __name__ == "__main__":
    main()

"""Run switches and Clear filters in a real headless Chromium, with the page's refresh tick at the worst moment.

The page re-reads the runs when they change on disk (``controls/callbacks.py``). Dash keeps only the newest call
of a callback: when the tick fires it again before an earlier call's answer is applied, that answer is dropped.
A run switch or a Clear filters click that met a tick that way used to be lost without a word (the epoch
stayed, the caption never named the new run's latest epoch; the filters stayed on). By chance that is about
one run switch in sixty; here the page ticks exactly then, in both orders: while the switch's request is on its
way (its ``fetch`` is wrapped), and in the same moment as the click, just before the page handles it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runners.eval_viewer.controls.ids import EPOCH_SELECT, REFRESH, RUN_SELECT
from runners.eval_viewer.table.ids import TABLE_CLEAR_FILTERS
from tests.e2e.viewer_page import filter_column, pick, wait_caption
from tests.runs import train, write_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300), pytest.mark.slow]

SIZES = {"many": 24, "few": 12}  # two runs with the same epochs (0 and 1); their sizes tell them apart
TICK = f"""
window.refreshTicks = 1000;
window.tickRefresh = () => window.dash_clientside.set_props('{REFRESH}', {{data: ++window.refreshTicks}});
window.tickOn = null;  // 'click': with the next click; 'id.prop': when a request for that changed prop leaves
document.addEventListener('click', () => {{
    if (window.tickOn === 'click') {{ window.tickOn = null; window.tickRefresh(); }}
}}, true);
const send = window.fetch;
window.fetch = function (url, options) {{
    const sent = send.apply(this, arguments);
    const changed = JSON.parse((options && options.body) || '{{}}').changedPropIds || [];
    if (window.tickOn && changed.includes(window.tickOn)) {{ window.tickOn = null; window.tickRefresh(); }}
    return sent;
}};
"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("refresh")
    (root / "configs").mkdir()
    for run, size in SIZES.items():
        train(write_config(root / "configs" / f"{run}.py", root / "logs" / run, epochs=2, val_size=size,
                           checkpoint_method="all"))
    return root / "logs"


def _open(new_page, url: str, logs: Path, run: str):
    """The page at ``run``'s epoch 0, ready to tick its refresh on demand (``window.tickOn``)."""
    page = new_page("about:blank")
    page.add_init_script(TICK)
    page.goto(f"{url}/?run={logs / run}&epoch=epoch_0")
    wait_caption(page, f"epoch 0: {SIZES[run]} datapoints")
    return page


@pytest.mark.parametrize("tick_on", ["request", "click"])
def test_a_run_switch_met_by_a_refresh_tick_opens_the_new_runs_latest_epoch(viewer_url, logs, new_page, tick_on):
    first, second = SIZES
    page = _open(new_page, viewer_url, logs, first)
    arm = f"window.tickOn = '{RUN_SELECT}.value'" if tick_on == "request" else "window.tickOn = 'click'"
    for run in [second, first] * 3:
        page.click(f"#{RUN_SELECT}")
        page.evaluate(arm)
        page.get_by_role("option", name=f"logs/{run} (trainer)", exact=True).click()
        wait_caption(page, f"epoch 1: {SIZES[run]} datapoints")
        assert page.evaluate("window.tickOn") is None, "the refresh tick did not come (the test's timing is off)"
        assert page.locator(f"#{EPOCH_SELECT}").inner_text().strip() == "epoch 1"
        pick(page, EPOCH_SELECT, "epoch 0")  # so that the next run switch changes the epoch back to 1
        wait_caption(page, f"epoch 0: {SIZES[run]} datapoints")


def test_clear_filters_met_by_a_refresh_tick_clears_them(viewer_url, logs, new_page):
    run = next(iter(SIZES))
    page = _open(new_page, viewer_url, logs, run)
    for _ in range(3):
        filter_column(page, "idx", "7")
        wait_caption(page, f"epoch 0: 1 of {SIZES[run]} datapoints match the filters")
        page.evaluate("window.tickOn = 'click'")
        page.click(f"#{TABLE_CLEAR_FILTERS}")
        wait_caption(page, f"epoch 0: {SIZES[run]} datapoints")
        assert page.evaluate("window.tickOn") is None, "the refresh tick did not come (the test's timing is off)"

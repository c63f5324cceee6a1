"""The viewer's second round (issue 29) in a real headless Chromium: what was wrong or broken.

One trained run, ``small`` (12 validation datapoints, debug outputs at every epoch 0..2), beside runs the
tests make for themselves.
"""

from __future__ import annotations

import shutil

import pytest

from runners.eval_viewer.layout import controls, ids
from tests.e2e.conftest import DEBUGGER, serve_viewer
from tests.e2e.viewer_page import column, open_row, wait_caption, wait_title
from tests.runs import train, write_config

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

# What the panel shows at each frame the browser paints: its title where the title is on screen, else ''.
RECORD_FRAMES = """panel => {
    window.framesSeen = [];
    const record = () => {
        const title = document.querySelector(`#${panel} .datapoint-title`);
        window.framesSeen.push(title && title.offsetParent !== null ? title.innerText : '');
        if (window.framesSeen.length < 100000) { requestAnimationFrame(record); }
    };
    requestAnimationFrame(record);
}"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("second_round")
    (root / "configs").mkdir()
    train(write_config(root / "configs" / "small.py", root / "logs" / "small", epochs=3, checkpoint_method="all",
                       val_size=12, extra=DEBUGGER))
    return root / "logs"


def test_compare_epochs_never_shows_the_previous_datapoint(viewer_url, new_page):
    """Item 1: open A, Compare epochs, back, open B, Compare epochs again: it showed A until B was drawn."""
    page = new_page(viewer_url)
    wait_caption(page, "12 datapoints")
    order = column(page, "idx")
    open_row(page, 0)
    page.click(f"#{ids.TAB_COMPARE_EPOCHS}")
    wait_title(page, ids.COMPARE_EPOCHS_PANEL, f"datapoint {order[0]} ")
    page.click(f"#{ids.TAB_DATAPOINT}")
    open_row(page, 1)
    wait_title(page, ids.DATAPOINT_PANEL, f"datapoint {order[1]} ")

    page.evaluate(RECORD_FRAMES, ids.COMPARE_EPOCHS_PANEL)
    page.click(f"#{ids.TAB_COMPARE_EPOCHS}")
    wait_title(page, ids.COMPARE_EPOCHS_PANEL, f"datapoint {order[1]} ")
    seen = page.evaluate("window.framesSeen")
    assert not [title for title in seen if f"datapoint {order[0]} " in title], \
        f"Compare epochs showed datapoint {order[0]} while datapoint {order[1]} was asked for"
    assert page.locator(f"#{ids.COMPARE_EPOCHS_STATUS}").inner_text() == ""


def test_every_panel_says_loading_until_it_shows_the_datapoint_asked_for(viewer_url, new_page):
    """Item 1: a slow answer (delayed in the browser) leaves 'loading datapoint N …' in place, never the last one."""
    page = new_page("about:blank")
    page.add_init_script(SLOW_SERVER.replace("DELAY_MS", "1500"))
    page.goto(viewer_url)
    wait_caption(page, "12 datapoints")
    order = column(page, "idx")
    open_row(page, 0)
    wait_title(page, ids.DATAPOINT_PANEL, f"datapoint {order[0]} ")
    open_row(page, 1)
    page.wait_for_selector(f"#{ids.DATAPOINT_STATUS}:has-text('loading datapoint {order[1]} …')")
    wait_title(page, ids.DATAPOINT_PANEL, f"datapoint {order[1]} ")
    assert page.locator(f"#{ids.DATAPOINT_STATUS}").inner_text() == ""


def test_a_link_to_compare_epochs_draws_on_a_loaded_machine(logs, new_page, monkeypatch):
    """Item 2: the page's refresh ran callbacks on a timer, and Dash holds back every callback downstream of one in
    flight (the comparison is, through the epoch list): on a loaded machine, where answers took longer than the
    refresh period, one was always in flight and the link drew nothing. Here the browser runs 4 times slower, every
    answer takes 2 s and the page refreshes twice a second."""
    monkeypatch.setattr(controls, "REFRESH_MS", 500)
    with serve_viewer([str(logs)]) as url:
        page = new_page("about:blank")
        page.add_init_script(SLOW_SERVER.replace("DELAY_MS", "2000"))
        page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": 4})
        page.goto(f"{url}?run={logs / 'small'}&epoch=epoch_2&idx=7&tab={ids.TAB_COMPARE_EPOCHS}")
        page.wait_for_selector(f"#{ids.COMPARE_EPOCHS_STATUS}:has-text('loading datapoint 7 …')")
        wait_title(page, ids.COMPARE_EPOCHS_PANEL, "datapoint 7 · logs/small", timeout=60_000)
        page.close()  # before the server stops


def test_the_page_runs_no_callback_until_the_runs_on_disk_change(logs, tmp_path, new_page, monkeypatch):
    """Item 2: the refresh asks outside Dash's callbacks; a change on disk (a new run) still shows without a reload."""
    monkeypatch.setattr(controls, "REFRESH_MS", 300)
    folder = tmp_path / "logs"
    shutil.copytree(logs / "small", folder / "small")
    with serve_viewer([str(folder)]) as url:
        page = new_page(url)
        wait_caption(page, "12 datapoints")
        asked = []
        page.on("request", lambda request: asked.append(request.url) if "_dash-update-component" in request.url
                else None)
        with page.expect_request(lambda request: "_lantern/changes" in request.url):
            pass
        for _ in range(3):  # three more questions, answered 'nothing changed'
            with page.expect_response(lambda response: "_lantern/changes" in response.url):
                pass
        assert asked == [], "the page ran callbacks though nothing changed on disk"
        shutil.copytree(logs / "small", folder / "copy")
        page.click(f"#{ids.RUN_SELECT}")
        page.get_by_role("option", name="logs/copy (trainer)", exact=True).wait_for()
        page.keyboard.press("Escape")
        page.close()  # before the server stops


# Every answer of the server's callbacks delayed in the browser, as on a machine under heavy load.
SLOW_SERVER = """
const send = window.fetch;
window.fetch = async function (url, options) {
    const answer = await send.apply(this, arguments);
    if (String(url).includes('_dash-update-component')) {
        await new Promise(resolve => setTimeout(resolve, DELAY_MS));
    }
    return answer;
};
"""

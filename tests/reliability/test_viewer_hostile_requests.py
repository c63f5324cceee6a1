"""Requests the page never sends, sent to a real viewer server: each gives a message in place, never an HTTP 500,
and nothing in them becomes a query, a path or markup."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest

from run_dir.saved_views import views_file
from runners.eval_viewer.address.ids import SAVE_VIEW_ASKED, SAVED_VIEWS, VIEW_NOTE
from runners.eval_viewer.address.saved_views import SavedViews, SavedViewsError
from runners.eval_viewer.app import PAGE_SENDS, create_app
from runners.eval_viewer.compare_epochs.ids import (
    COMPARE_EPOCHS_PANEL,
    COMPARE_EPOCHS_SELECT,
    COMPARE_EPOCHS_SHOWN,
    TAB_COMPARE_EPOCHS,
)
from runners.eval_viewer.compare_runs.ids import COMPARE_RUNS_SHOWN, TAB_COMPARE_RUNS
from runners.eval_viewer.controls.ids import EPOCH_SELECT, RUN_SELECT
from runners.eval_viewer.datapoint.ids import DATAPOINT_PANEL, TAB_DATAPOINT
from runners.eval_viewer.failures.ids import FAILURES_CONFUSION_CHART, FAILURES_SEPARATORS_CHART
from runners.eval_viewer.gallery.ids import TAB_GALLERY
from runners.eval_viewer.model_report.ids import MODEL_REPORT_PANEL
from runners.eval_viewer.scores.ids import SCORE_GRID_FILTERS
from runners.eval_viewer.shared.ids import SELECTED, TABS
from runners.eval_viewer.shared.request_check import sent_by_the_page
from runners.eval_viewer.table.ids import TABLE, TABLE_CAPTION, TABLE_IDX_FILTER, TABLE_QUERY, TABLE_ROWS
from runners.eval_viewer.training.ids import TAB_TRAINING, TRAINING_SHOWN
from tests.e2e.synthetic_runs import write_table_run
from tests.reliability.viewer_server import (
    HTTP_WAIT_S,
    call_callback,
    callback_body,
    dependencies,
    dependency_name,
    post_callback,
    serve_viewer,
)

pytestmark = pytest.mark.timeout(120)

ROWS = 10
REFUSED: list[str] = []  # the requests the served viewer refused as ones the page never sends (its log)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hostile") / "logs"
    label = np.arange(ROWS, dtype=np.float64) % 6
    run = write_table_run(str(folder), "run", label, (np.arange(ROWS) + 1) % 6, np.linspace(0.1, 1.0, ROWS))
    with serve_viewer([str(folder)], refused=REFUSED, views_dir=str(folder.parent / "views")) as url:
        yield url, run


def _rows(url: str, run: str, request: object) -> tuple[int, dict]:
    query = {"run": run, "epoch": "epoch_0", "metric": "cross_entropy", "version": None, "idx": None}
    status, body = call_callback(url, f"{TABLE_ROWS}.data", {
        f"{TABLE}.getRowsRequest": request, f"{TABLE_QUERY}.data": query})
    return status, (json.loads(body)["response"] if status == 200 else {"body": body})


MALFORMED_PAGING = {
    "sort model as a dict": {"startRow": 0, "endRow": 100, "sortModel": {"colId": "idx", "sort": "asc"}},
    "sort model naming a number": {"startRow": 0, "endRow": 100, "sortModel": [{"colId": 5}]},
    "string startRow": {"startRow": "0", "endRow": 100},
    "endRow beyond int64": {"startRow": 0, "endRow": 10**30},
    "negative startRow": {"startRow": -5, "endRow": 100},
    "filter model as a list": {"startRow": 0, "endRow": 100, "filterModel": ["idx"]},
    "number filter holding text": {"startRow": 0, "endRow": 100, "filterModel": {
        "cross_entropy": {"filterType": "number", "type": "lessThan", "filter": "abc"}}},
    "number filter holding NaN": {"startRow": 0, "endRow": 100, "filterModel": {
        "cross_entropy": {"filterType": "number", "type": "inRange", "filter": 0, "filterTo": float("nan")}}},
    "filter on an unknown column": {"startRow": 0, "endRow": 100, "filterModel": {
        "x'; DROP TABLE t; --": {"filterType": "number", "type": "equals", "filter": 1}}},
    "a request that is a list": [0, 100],
}


@pytest.mark.parametrize("request_body", MALFORMED_PAGING.values(), ids=MALFORMED_PAGING.keys())
def test_a_malformed_request_for_rows_gives_a_message_in_the_caption(served, request_body):
    url, run = served
    status, response = _rows(url, run, request_body)
    assert status == 200, response
    assert (response[TABLE_ROWS]["data"]["rowData"], response[TABLE_ROWS]["data"]["rowCount"]) == ([], 0)
    assert response[TABLE_CAPTION]["children"], "no message says what was wrong"


def test_a_superscript_digit_in_the_label_filter_matches_no_class(served):
    url, run = served
    status, response = _rows(url, run, {"startRow": 0, "endRow": 100, "filterModel": {
        "label": {"filterType": "text", "type": "contains", "filter": "²"}}})
    assert status == 200, response
    assert response[TABLE_ROWS]["data"]["rowCount"] == 0


@pytest.mark.parametrize("idx", [10**30, -1, "7", 1.5, True, [1], {"idx": 3}])
def test_an_open_idx_that_is_not_a_dataset_index_gives_a_message_in_the_panel(served, idx):
    url, run = served
    status, body = call_callback(url, f"{DATAPOINT_PANEL}.children", {
        f"{SELECTED}.data": idx, f"{RUN_SELECT}.value": run, f"{EPOCH_SELECT}.value": "epoch_0",
        f"{TABS}.value": TAB_DATAPOINT})
    assert status == 200, body
    assert "is not a dataset index" in body


@pytest.mark.parametrize("shown", [{"idx": 10**30}, {"idx": "3"}, ["idx", 3], "3"])
def test_a_compared_idx_that_is_not_a_dataset_index_gives_a_message_or_nothing(served, shown):
    url, run = served
    status, body = call_callback(url, f"{COMPARE_EPOCHS_PANEL}.children", {
        f"{COMPARE_EPOCHS_SHOWN}.data": shown, f"{COMPARE_EPOCHS_SELECT}.value": ["epoch_0"],
        f"{TABS}.value": TAB_COMPARE_EPOCHS, f"{RUN_SELECT}.value": run})
    assert status == 200, body
    assert "is not a dataset index" in body or json.loads(body)["response"] == {}  # not a store the page writes


@pytest.mark.parametrize("address", ["idx=%C2%B2", "narrow=..%2F..%2Fx", "narrow=confusion%3A%3Cb%3E%7C%3Ci%3E",
                                     "f.x%27%3B%20DROP=1", "f.cross_entropy=%3E%20abc", "cmp_epochs=..%2F..",
                                     "cmp_run=%2Fetc&cmp_epoch=..", "pin=%3Cscript%3E&hide=idx",
                                     "idx=99999999999999999999999", "idx=-3", "idx=1e3",
                                     "tab=%3Cscript%3E", "run=..%2F..%2F..%2Fetc&epoch=..%2F..",
                                     "metric=%27%3B%20DROP&sort=-%22idx%22"])
def test_a_hostile_address_builds_the_page(served, address):
    """The page is built from its address (the layout request's Referer): what it cannot use is said or ignored."""
    url, _ = served
    request = urllib.request.Request(f"{url}/_dash-layout", headers={"Referer": f"{url}/?{address}"})
    with urllib.request.urlopen(request, timeout=HTTP_WAIT_S) as response:
        assert response.status == 200
        layout = response.read().decode()
    assert "<script>" not in layout
    if address.startswith("idx="):
        assert "is not a dataset index" in layout


@pytest.mark.parametrize("name", ["x" * 81, "a\x00b", "", "   ", 5, None, ["a"]])
def test_a_saved_view_name_that_is_not_one_is_refused_saying_why(served, tmp_path, name):
    url, run = served
    status, body = call_callback(url, f"{SAVED_VIEWS}.options", {
        f"{SAVE_VIEW_ASKED}.data": {"name": name, "address": f"?run={run}"}, f"{RUN_SELECT}.value": run})
    assert status == 200, body
    note = json.loads(body)["response"][VIEW_NOTE]["children"]
    assert note.startswith("not saved: ") and ("name" in note)


def test_a_saved_view_keeps_only_what_an_address_holds(tmp_path):
    views = SavedViews(str(tmp_path / "views"))
    views.save("/runs/a", "../x", "?run=/runs/a&idx=3&evil=1&f.loss=%3E2&__proto__=1")
    assert views.of_run("/runs/a") == {"../x": "run=%2Fruns%2Fa&idx=3&f.loss=%3E2"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["views"]
    stored = sorted(p.name for p in (tmp_path / "views").iterdir())
    assert stored == [".lock", os.path.basename(views_file("", "/runs/a"))]


@pytest.mark.parametrize("kind", ["fifo", "link", "huge", "not_json", "wrong_shape"])
def test_a_bad_saved_views_file_is_named_never_followed_nor_overwritten(tmp_path, kind):
    (tmp_path / "views").mkdir()
    path = tmp_path / "views" / os.path.basename(views_file("", "/runs/a"))
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "link":
        (tmp_path / "elsewhere.json").write_text('{"format": "lantern-viewer-views", "run": "/runs/a", "views": {}}')
        os.symlink(tmp_path / "elsewhere.json", path)
    elif kind == "huge":
        path.write_text('{"format": "lantern-viewer-views", "run": "/runs/a", "views": {}, "pad": "' + "x" * (5 << 20)
                        + '"}')
    elif kind == "not_json":
        path.write_text("{not json")
    else:
        path.write_text('{"format": "lantern-viewer-views", "run": "/runs/a", "views": {"n": 5}}')
    views = SavedViews(str(tmp_path / "views"))
    with pytest.raises(SavedViewsError, match="views"):
        views.of_run("/runs/a")
    with pytest.raises(SavedViewsError):
        views.save("/runs/a", "n", "?run=/runs/a")
    if kind == "link":
        assert (tmp_path / "elsewhere.json").read_text() == \
            '{"format": "lantern-viewer-views", "run": "/runs/a", "views": {}}'


# What a hostile request puts in place of a value the page sends: an int beyond 64 bits (Dash's orjson refuses to
# send one back), a flag, a float, long text, a list and a dict, each of them a wrong type somewhere; fewer in
# place of one key of a dict the page writes.
BAD_VALUES = [10**30, True, -1.5, "x" * 300, [10**30], {"idx": 10**30}]
BAD_KEYS = [10**30, -1.5, [10**30], {"idx": 10**30}]


def _page_values(url: str, run: str) -> dict[str, Any]:
    """What the page itself holds (``'<id>.<property>'``: value) when opened on the Gallery, Compare runs and
    Training tabs, with a datapoint open; then what the browser writes that no page is built with."""
    found: dict[str, Any] = {}

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for child in node:
                walk(child)
        elif isinstance(node, dict):
            props = node.get("props")
            if isinstance(props, dict) and isinstance(props.get("id"), str):
                found.update({f"{props['id']}.{name}": value for name, value in props.items()
                              if f"{props['id']}.{name}" not in found})
            for child in node.values():
                walk(child)

    for address in (f"tab={TAB_GALLERY}&idx=3", f"tab={TAB_TRAINING}",
                    f"tab={TAB_COMPARE_RUNS}&cmp_run={quote(run)}&cmp_epoch=epoch_0"):
        request = urllib.request.Request(f"{url}/_dash-layout", headers={"Referer": f"{url}/?{address}"})
        with urllib.request.urlopen(request, timeout=HTTP_WAIT_S) as response:
            walk(json.load(response))
    return {**found, **{  # written by the browser's scripts and by callbacks, as they write them
        f"{COMPARE_EPOCHS_SHOWN}.data": {"idx": 3}, f"{COMPARE_RUNS_SHOWN}.data": {"idx": 3},
        f"{SAVE_VIEW_ASKED}.data": {"name": "mine", "address": f"?run={quote(run)}", "at": 1764000000000},
        f"{TABLE_IDX_FILTER}.data": {"run": run, "epoch": "epoch_0", "idx": [1, 2], "finding": "slice-0",
                                     "what": "a slice"},
        f"{TABLE}.getRowsRequest": {"startRow": 0, "endRow": 100, "filterModel": {}, "sortModel": []},
        f"{SCORE_GRID_FILTERS}.data": {"label": {"filterType": "text", "type": "contains", "filter": "1"}},
        f"{FAILURES_CONFUSION_CHART}.clickData": {"points": [{"x": "1", "y": "2"}]},
        f"{FAILURES_SEPARATORS_CHART}.clickData": {"points": [{"customdata": "cross_entropy"}]},
        f"{TRAINING_SHOWN}.data": {"run": run, "version": "1", "layer": 0}}}


def _hostile(value: Any) -> Iterator[tuple[str, Any]]:
    """Each bad value in place of ``value``, then, where the page writes a dict, in place of each of its keys (and
    of its dicts' keys): ``(what was replaced, the value sent)``."""
    for bad in BAD_VALUES:
        yield f"={bad!r:.20}", bad
    for key, inner in (value.items() if isinstance(value, dict) else ()):
        for bad in BAD_KEYS:
            yield f"[{key!r}]={bad!r:.20}", {**value, key: bad}
        for inner_key in (inner if isinstance(inner, dict) else ()):
            for bad in BAD_KEYS:
                yield f"[{key!r}][{inner_key!r}]={bad!r:.20}", {**value, key: {**inner, inner_key: bad}}


def test_no_callback_answers_a_value_of_a_type_the_page_never_sends_with_an_http_500(served):
    """Every server callback, each of its inputs and states in turn set to values of the wrong type (the rest
    unset but for the run): a message in place, or nothing (a 204), never an HTTP 500."""
    url, run = served
    page = _page_values(url, run)
    failed = []
    for callback in (c for c in dependencies(url) if not c.get("clientside_function")):
        inputs = [dependency_name(d) for d in callback["inputs"]]
        for name in (dependency_name(d) for d in callback["inputs"] + callback["state"]):
            for replaced, value in _hostile(page.get(name)):
                values = {f"{RUN_SELECT}.value": run, name: value}
                status, _ = post_callback(url, callback, values, changed=[name] if name in inputs else None)
                if status == 500:
                    failed.append(f"{callback['output'][:70]} <- {name}{replaced}")
    assert not failed, f"{len(failed)} requests answered with an HTTP 500:\n" + "\n".join(failed)


def test_every_request_the_page_sends_passes_the_check(served, tmp_path):
    """The check refuses nothing the page sends: every server callback asked with what the page holds."""
    url, run = served
    page, callbacks = _page_values(url, run), create_app([str(tmp_path)]).callback_map
    refused = [c["output"] for c in dependencies(url) if not c.get("clientside_function")
               and not sent_by_the_page(callback_body(c, page), callbacks, PAGE_SENDS)]
    assert not refused, f"the page's own requests refused: {refused}"


BODIES = {"JSON null": "null", "a list": "[1]", "text": '"x"', "deep nesting": "[" * 100_000 + "]" * 100_000,
          "no output named": "{}", "an unknown output": '{"output": "x.y", "inputs": []}',
          "inputs not a list": json.dumps({"output": f"{MODEL_REPORT_PANEL}.children", "inputs": 5})}


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
def test_a_body_not_shaped_as_dash_expects_gives_no_http_500(served, body):
    url, _ = served
    request = urllib.request.Request(f"{url}/_dash-update-component", data=body.encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=HTTP_WAIT_S) as response:
        assert (response.status, response.read()) == (204, b"")


def test_a_refused_request_is_logged_naming_its_callback(served):
    """So a feature the check wrongly refuses shows in the viewer's log (and fails the tests, ``serve_viewer``)."""
    url, run = served
    before = len(REFUSED)
    status, _ = call_callback(url, f"{EPOCH_SELECT}.options", {f"{RUN_SELECT}.value": ["not", "a", "run"]})
    assert status == 204
    assert len(REFUSED) == before + 1 and f"{EPOCH_SELECT}.options" in REFUSED[-1]


def test_a_request_for_a_callback_that_runs_in_the_browser_gives_no_http_500(served):
    url, run = served
    clientside = next(c for c in dependencies(url) if c.get("clientside_function"))
    status, body = post_callback(url, clientside, {f"{RUN_SELECT}.value": run})
    assert (status, body) == (204, "")


@pytest.mark.parametrize("body, status", [("{not json", 400), ('{"output": 1}', 415)])
def test_a_body_that_is_not_json_is_a_bad_request(served, body, status):
    url, _ = served
    request = urllib.request.Request(f"{url}/_dash-update-component", data=body.encode(),
                                     headers={"Content-Type": "application/json" if status == 400 else "text/plain"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=HTTP_WAIT_S)
    assert refused.value.code == status

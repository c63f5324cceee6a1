"""The viewer's new inputs under hostile requests, against a real server: the picture address (run, epoch, idx,
overlay), the gallery's view of the table, the run-against-run sides and rows, the export's record of the
filters. Nothing typed or sent becomes a path, SQL or markup: each is looked up or bound, and anything else is a
message in place (a 404 in plain text for a picture), never a server error."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request

import pytest

from runners.eval_viewer.compare_runs import view as run_diff
from runners.eval_viewer.compare_runs.ids import RUN_DIFF_QUERY, RUN_DIFF_ROWS, RUN_DIFF_SHOWN, RUN_DIFF_TABLE
from runners.eval_viewer.export.report import Selection, write_html
from runners.eval_viewer.gallery import view as gallery
from runners.eval_viewer.gallery.ids import GALLERY_OVERLAY, GALLERY_PAGE, GALLERY_SHOWN, GALLERY_TILES
from tests.e2e.conftest import DEBUGGER
from tests.reliability.viewer_server import HTTP_WAIT_S, call_callback, serve_viewer
from tests.runs import train, write_config

pytestmark = pytest.mark.timeout(400)
HOSTILE_TEXT = ["<script>alert(1)</script>", "'; DROP TABLE t; --", "../../../../etc/passwd", "%00", "²", ""]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("trust_pictures")
    (root / "configs").mkdir()
    run = train(write_config(root / "configs" / "run.py", root / "logs" / "run", epochs=1, val_size=8,
                             extra=DEBUGGER))
    (root / "secret.png").write_bytes(b"\x89PNG not yours")
    with serve_viewer([str(root / "logs")]) as url:
        yield url, run


def picture(url: str, **query: str) -> tuple[int, str, bytes]:
    address = f"{url}/lantern-picture?{urllib.parse.urlencode(query)}"
    try:
        with urllib.request.urlopen(address, timeout=HTTP_WAIT_S) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as exc:
        assert exc.headers["X-Content-Type-Options"] == "nosniff"
        return exc.code, exc.headers["Content-Type"], exc.read()


def test_a_picture_is_served_only_for_a_run_epoch_idx_and_overlay_the_viewer_knows(served):
    url, run = served
    status, kind, body = picture(url, run=run, idx="3", epoch="epoch_0", overlay="gradcam")
    assert (status, kind) == (200, "image/png") and body.startswith(b"\x89PNG")
    refused = {
        "no such run": [{"run": value, "idx": "3"} for value in [*HOSTILE_TEXT, f"{run}/..", f"{run}/../../secret.png",
                                                                 str(run).upper()]],
        "idx must be a datapoint index": [{"run": run, "idx": value} for value in
                                          ["²", "٣", "1e3", "-1", "0x10", " 3", "3 ", "1" * 19, "<b>3</b>", ""]],
        "has no epoch": [{"run": run, "idx": "3", "epoch": value} for value in HOSTILE_TEXT[:4]],
        "to draw over its image": [{"run": run, "idx": "3", "epoch": "epoch_0", "overlay": value}
                                   for value in [*HOSTILE_TEXT[:4], "layer3_energy"]],
        "were not captured": [{"run": run, "idx": str(10**17)}],
    }
    for reason, queries in refused.items():
        for query in queries:
            status, kind, body = picture(url, **query)
            assert status == 404 and kind.startswith("text/plain") and reason in body.decode(), (query, body)


def test_the_gallery_answers_a_malformed_or_hostile_view_with_a_message(served):
    url, run = served
    query = {"run": run, "epoch": "epoch_0", "metric": "cross_entropy", "version": None, "idx": None}
    cases = [
        ({"query": query, "filterModel": "x", "sortModel": []}, "filter model is not an object"),
        ({"query": query, "filterModel": {}, "sortModel": {"colId": "idx"}}, "sort model is not a list"),
        ({"query": query, "filterModel": {"idx": 3}, "sortModel": []}, "filter model is not an object"),
        ({"query": query, "filterModel": {"idx": {"filterType": "text", "filter": "²"}}, "sortModel": []},
         "is not a number"),
        ({"query": query, "filterModel": {}, "sortModel": [{"colId": 'idx" DESC; --', "sort": "asc"}]},
         "no column"),
        ({"query": {"run": [run], "epoch": {"a": 1}}, "filterModel": {}, "sortModel": []}, gallery.NOTHING),
        ({"query": ["not", "an", "object"]}, gallery.NOTHING),
    ]
    for shown, message in cases:
        status, body = call_callback(url, f"{GALLERY_TILES}.children", {f"{GALLERY_SHOWN}.data": shown,
                                                                        f"{GALLERY_PAGE}.active_page": 1})
        assert status == 200 and message in body, (shown, body)
    for overlay, page in (("<img src=x onerror=alert(1)>", 10**30), ("gradcam", "2"), (None, -4), ("gradcam", True)):
        status, body = call_callback(url, f"{GALLERY_TILES}.children", {
            f"{GALLERY_SHOWN}.data": {"query": query, "filterModel": {}, "sortModel": []},
            f"{GALLERY_OVERLAY}.value": overlay, f"{GALLERY_PAGE}.active_page": page})
        assert status == 200, body
        response = json.loads(body)["response"]
        assert response[GALLERY_OVERLAY]["value"] in ("", "gradcam")
        assert "onerror" not in json.dumps(response[GALLERY_TILES])
        assert len(response[GALLERY_TILES]["children"]) == 8  # the last page there is: all eight


def test_run_against_run_answers_hostile_sides_and_requests_with_a_message(served):
    url, run = served
    for shown in ({"first": "x", "second": None}, {"first": {"run": ["x"]}, "second": {"run": {"a": 1}}},
                  {"first": {"run": run, "epoch": "../epoch_0"}, "second": {"run": run, "epoch": "epoch_0"}}):
        status, body = call_callback(url, f"{RUN_DIFF_QUERY}.data", {f"{RUN_DIFF_SHOWN}.data": shown})
        assert status == 200 and run_diff.CHOOSE in body, body
    query = {"first": {"run": run, "epoch": "epoch_0"}, "second": {"run": run, "epoch": "epoch_0"}, "metric": None}
    for request, message in (({"startRow": "0", "endRow": 100}, "not a row number"),
                             ({"startRow": 0, "endRow": 100, "sortModel": {"colId": "idx"}}, "not a list"),
                             ({"startRow": 0, "endRow": 10 ** 30}, "not a row number"),
                             ({"startRow": 0, "endRow": 100, "filterModel": {'x") OR 1=1 --': {
                                 "filterType": "text", "type": "contains", "filter": "1"}}}, "no column"),
                             ("everything", "not an object")):
        status, body = call_callback(url, f"{RUN_DIFF_ROWS}.data", {
            f"{RUN_DIFF_TABLE}.getRowsRequest": request, f"{RUN_DIFF_QUERY}.data": query})
        assert status == 200 and message in body, (request, body)
    status, body = call_callback(url, f"{RUN_DIFF_ROWS}.data", {
        f"{RUN_DIFF_TABLE}.getRowsRequest": {"startRow": 0, "endRow": 100}, f"{RUN_DIFF_QUERY}.data": query})
    assert status == 200 and json.loads(body)["response"][RUN_DIFF_ROWS]["data"]["rowCount"] == 8


def test_the_export_s_record_of_the_filters_is_text_never_markup(tmp_path):
    typed = "</script><script>alert(1)</script>"
    out = tmp_path / "report.html"
    write_html(str(out), f"report {typed}", [("Datapoints", [typed])], note=typed,
               selection=Selection(f"1 of 8 datapoints where name = {typed!r}", {"filter_model": {"name": typed}}))
    page = out.read_text()
    assert "<script>alert(1)" not in page and page.count("</script>") == 1  # only the record's own script ends
    record = re.search(r"id='lantern-selection'>(.*?)</script>", page).group(1)
    assert json.loads(record) == {"filter_model": {"name": typed}}

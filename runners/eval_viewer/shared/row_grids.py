"""The viewer's tables served a block of rows at a time (AG Grid's infinite row model through dash-ag-grid): each
answer handed to the request it answers, by the browser, instead of through dash-ag-grid's ``getRowsResponse``.

dash-ag-grid (35.3) applies a ``getRowsResponse`` that follows an answer of 0 rows (no sides joined yet, a filter
that matched nothing) in a ``setTimeout``, then clears the prop; the clearing re-runs its effect, whose cleanup
cancels that timeout. Whether the timeout or React's re-render runs first is a race, so about one such answer in
three was never applied: the grid held the new row count with its block loading for good (rows drawn empty, the
caption saying the rows came). It also applies an answer to whatever request came last, not to the one answered.
So a server answers into a store (``answer``: the rows, their count and the request they answer), and the browser
(``apply_answer_script``) calls that request's own ``successCallback``.

Every request must be answered: AG Grid counts a request as loading until its callback is called, even once a new
sort or filter has dropped its block, and asks for nothing more while ``maxConcurrentDatasourceRequests`` are
loading; and Dash keeps only the latest call's answer, so of two requests in flight the older is never answered. A
grid therefore asks one block at a time (``ONE_REQUEST_AT_A_TIME``): the request in flight is the latest one, its
answer is applied even when a newer sort has dropped its block (AG Grid then ignores the rows and asks again), and
an answer for another request (none expected) is left alone.
"""

from __future__ import annotations

import json
from typing import Any

from runners.eval_viewer.shared.browser_input import storable

ONE_REQUEST_AT_A_TIME = {"maxConcurrentDatasourceRequests": 1}  # a grid's ``dashGridOptions`` (see the module)
# What identifies a request: an answer carries these fields of the request it answers.
REQUEST_FIELDS = ("startRow", "endRow", "sortModel", "filterModel")

_APPLY_ANSWER = """function(answer) {
    // The grid's latest request, as dash-ag-grid wrote it (its callbacks included), answered only by an answer
    // made for it: the fields compared with their keys sorted, as the server may send them in another order.
    const none = window.dash_clientside.no_update;
    const request = ((window.dash_component_api.getLayout('GRID') || {}).props || {}).getRowsRequest;
    if (!answer || !request || typeof request.successCallback !== 'function') { return none; }
    const sorted = (key, value) => value && typeof value === 'object' && !Array.isArray(value)
        ? Object.fromEntries(Object.keys(value).sort().map(name => [name, value[name]])) : value;
    const fields = asked => JSON.stringify(FIELDS.map(name => (asked || {})[name] ?? null), sorted);
    if (fields(request) === fields(answer.request)) { request.successCallback(answer.rowData, answer.rowCount); }
    return none;
}"""


def answer(rows: list[dict], count: int, request: Any) -> dict[str, Any]:
    """What a server sends the grid's answer store: ``rows`` and ``count`` for ``request`` (its fields as the page
    may store them: a crafted request's huge int comes back as text, which no request of the grid's matches)."""
    asked = request if isinstance(request, dict) else {}
    return {"rowData": rows, "rowCount": count,
            "request": storable({name: asked.get(name) for name in REQUEST_FIELDS})}


def apply_answer_script(grid: str) -> str:
    """The browser's step that hands an answer from the grid's answer store to the request of ``grid`` it answers
    (see the module)."""
    return _APPLY_ANSWER.replace("GRID", grid).replace("FIELDS", json.dumps(REQUEST_FIELDS))

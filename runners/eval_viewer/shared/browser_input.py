"""What the browser sends, checked before it is used: every callback request, a datapoint's idx, the table's
paging requests.

The page sends these as it was built to, but anything can POST to a callback or type an address: a value of the
wrong type must give a message in place, or nothing, never an HTTP 500 (Python's ``str.isdigit`` is true for
``'²'``, which ``int`` refuses; a sort model may come as a dict; an idx as 10^30). ``refuse_what_the_page_never_sends``
answers a callback request that is not as the page sends it with an empty 204 (what Dash's ``PreventUpdate``
gives) before any callback runs: each value must have the kind the page sends for its component and property, as
the features declare it (their ``SENDS``, joined in ``app.PAGE_SENDS``; ``sends.py`` has the kinds). Values whose
callback says in place what is wrong with them (an idx, the grid's request for rows, a view's name) are left to it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import flask
from dash import Dash

from runners.eval_viewer.shared.sends import MAX_IDX, PROPERTY_SENDS, Kind, Sends, anything, choice

MAX_ROWS_PER_REQUEST = 1000  # the grid asks for 100 at a time
_MAX_STORED_DEPTH = 8  # the page's own stores nest 3 deep
_DIGITS = re.compile(r"[0-9]{1,19}")  # ASCII digits only


class BadRequest(ValueError):
    """Something the browser sent is not what the page sends; the message says what was wrong."""


def datapoint_idx(value: Any) -> Optional[int]:
    """An open datapoint's idx as the page stores it (an int, or None for none); ``BadRequest`` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_IDX:
        raise BadRequest(f"datapoint idx {_shown(value)} is not a dataset index (a whole number 0..{MAX_IDX}); "
                         "open a datapoint from the table or the grid")
    return value


def typed_idx(text: str) -> Optional[int]:
    """``text`` (from the address, or typed) as a dataset index; None when it is not one: ASCII digits only."""
    text = text.strip()
    if not _DIGITS.fullmatch(text) or int(text) > MAX_IDX:
        return None
    return int(text)


@dataclass(frozen=True)
class Paging:
    """One of the grid's requests for rows: ``[start, end)`` under a filter model and a sort."""

    start: int
    end: int
    filter_model: dict = field(default_factory=dict)
    sort: Optional[str] = None
    descending: bool = False


def paging(request: Any) -> Paging:
    """The grid's ``getRowsRequest`` checked; ``BadRequest`` names the first field that is not as the grid sends."""
    if not isinstance(request, dict):
        raise BadRequest("the table's request for rows is not an object; reload the page")
    start, end = request.get("startRow", 0), request.get("endRow", 100)
    for name, value in (("startRow", start), ("endRow", end)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_IDX:
            raise BadRequest(f"the table's request for rows has {name} {_shown(value)}, not a row number; "
                             "reload the page")
    filter_model = request.get("filterModel") or {}
    sort_model = request.get("sortModel") or []
    if not isinstance(filter_model, dict) or not all(isinstance(c, dict) for c in filter_model.values()):
        raise BadRequest("the table's filter model is not an object of column filters; clear the filters")
    if not isinstance(sort_model, list) or not all(isinstance(s, dict) and isinstance(s.get("colId"), str)
                                                   for s in sort_model):
        raise BadRequest("the table's sort model is not a list of sorted columns; click a column header to sort")
    first = sort_model[0] if sort_model else {}
    return Paging(start, min(end, start + MAX_ROWS_PER_REQUEST), filter_model, first.get("colId"),
                  first.get("sort") == "desc")


def storable(value: Any, depth: int = 0) -> Any:
    """``value`` (sent by the browser) as the page may store it again: an int beyond 64 bits anywhere in it becomes
    its quoted text, as does nesting deeper than a page writes, for Dash's JSON encoder (orjson, where installed)
    refuses such an int with an HTTP 500."""
    if isinstance(value, int) and not isinstance(value, bool) and not -2**63 <= value < 2**64:
        return _shown(value)
    if isinstance(value, (list, dict)) and depth >= _MAX_STORED_DEPTH:
        return _shown(value)
    if isinstance(value, list):
        return [storable(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: storable(v, depth + 1) for k, v in value.items()}
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


UPDATE_ROUTE = "_dash-update-component"
LOG = logging.getLogger(__name__)  # each refusal, with the Flask app as ``viewer``: the tests fail on one


def sent_kind(component: Any, prop: str, sends: Sends) -> Optional[Kind]:
    """The kind of value the page sends for ``prop`` of ``component`` (an id, or a pattern's dict id)."""
    name = component.get("type") if isinstance(component, dict) else component
    return sends.get((name, prop)) or PROPERTY_SENDS.get(prop)


def refuse_what_the_page_never_sends(app: Dash, sends: Sends) -> None:
    """Answer a callback request that is not as the page sends it (``sent_by_the_page``) with an empty 204, before
    any callback runs. Call it once every callback is registered: it refuses to start (``ValueError``) while a
    server callback reads a value whose kind ``sends`` does not say."""
    unknown = sorted({f"{d['id']}.{d['property']}" for d in _server_dependencies(app.callback_map)
                      if sent_kind(_declared_id(d), d["property"], sends) is None})
    if unknown:
        raise ValueError(f"no feature says what the page sends for {unknown}; add each to the SENDS of the "
                         "feature's ids.py, with the kind of value the page sends")
    route = app.config.routes_pathname_prefix + UPDATE_ROUTE

    @app.server.before_request
    def refuse() -> Optional[flask.Response]:
        if flask.request.path != route or flask.request.method != "POST":
            return None
        try:
            body = flask.request.get_json()  # not JSON: Flask's 400 (or 415), as Dash would answer
        except RecursionError:  # JSON nested deeper than Python parses
            body = None
        if sent_by_the_page(body, app.callback_map, sends):
            return None
        output = body.get("output") if isinstance(body, dict) else None
        LOG.warning("refused a callback request the page never sends (for %s): answered 204", _shown(output),
                    extra={"viewer": app.server})  # a feature that does nothing would show here
        return flask.Response(status=204)


def sent_by_the_page(body: Any, callbacks: Mapping[str, dict], sends: Sends) -> bool:
    """Whether ``body`` (a request to ``UPDATE_ROUTE``) is as the page sends it: it names a server callback, that
    callback's outputs and its inputs and state, in order, each with a value of the kind the page sends
    (``sent_kind``), and which of its inputs changed. Dash itself answers anything else with an HTTP 500, or
    hands the callback what it never expects."""
    if not isinstance(body, dict) or not isinstance(body.get("output"), str):
        return False
    callback = callbacks.get(body["output"])
    if callback is None or "callback" not in callback:  # a clientside callback has no server function
        return False
    several = isinstance(callback["output"], list)
    outputs = [o.to_dict() for o in (callback["output"] if several else [callback["output"]])]
    inputs = body.get("inputs", [])
    return (_sent_as_declared(body.get("outputs") if several else [body.get("outputs")], outputs, sends, valued=False)
            and _sent_as_declared(inputs, callback["inputs"], sends)
            and _sent_as_declared(body.get("state", []), callback["state"], sends)
            and _changed_inputs(body.get("changedPropIds", []), inputs))


def _server_dependencies(callbacks: Mapping[str, dict]) -> list[dict]:
    return [d for c in callbacks.values() if "callback" in c for d in (*c["inputs"], *c["state"])]


def _declared_id(dependency: dict) -> Any:
    """A callback's declared component id; a pattern's (kept as JSON text by Dash) as its dict, wildcards as
    ``["ALL"]``."""
    component = dependency["id"]
    return json.loads(component) if component.startswith("{") else component


def _same_id(sent: Any, declared: Any) -> bool:
    """Whether a component id sent is the declared one, or matches the declared pattern."""
    if not isinstance(declared, dict):
        return isinstance(sent, str) and sent == declared
    return isinstance(sent, dict) and sent.keys() == declared.keys() and all(
        choice(sent[key]) if isinstance(value, list) else sent[key] == value
        for key, value in declared.items())


def _sent_as_declared(sent: Any, declared: list[dict], sends: Sends, valued: bool = True) -> bool:
    """Whether ``sent`` (a request's inputs, state or outputs) names the declared ones in order (a pattern's as a
    list of the components it matches) and, ``valued``, each holds a value of the kind the page sends."""
    if not isinstance(sent, list) or len(sent) != len(declared):
        return False
    for one, dependency in zip(sent, declared):
        component, prop = _declared_id(dependency), dependency["property"]
        items = one if isinstance(component, dict) else [one]
        if not isinstance(items, list) or not all(_item_sent(item, component, prop, sends, valued) for item in items):
            return False
    return True


def _item_sent(item: Any, component: Any, prop: str, sends: Sends, valued: bool) -> bool:
    if not isinstance(item, dict) or not _same_id(item.get("id"), component):
        return False
    if not valued:  # an output's property, less what follows '@' (Dash's mark of a duplicate output)
        return isinstance(item.get("property"), str) and item["property"].split("@")[0] == prop
    return item.get("property") == prop and _as_sent(item.get("value"), sent_kind(component, prop, sends))


def _as_sent(value: Any, kind: Kind) -> bool:
    """Whether ``value`` is of ``kind`` and, unless its callback checks it (``anything``), JSON that Dash can send
    back: no int beyond 64 bits, no deeper nesting than the page writes (``storable``)."""
    return value is None or kind is anything or (kind(value) and storable(value) == value)


def _changed_inputs(changed: Any, inputs: list) -> bool:
    """Whether ``changed`` (``changedPropIds``) lists only inputs of the request, as Dash names them."""
    names = {f"{_id_text(item['id'])}.{item['property']}" for one in inputs
             for item in (one if isinstance(one, list) else [one])}
    return isinstance(changed, list) and all(isinstance(name, str) and name in names for name in changed)


def _id_text(component: Any) -> str:
    """A component id as Dash's renderer writes it in ``changedPropIds``: a pattern's with its keys sorted."""
    return json.dumps(component, sort_keys=True, separators=(",", ":"), ensure_ascii=False) \
        if isinstance(component, dict) else component

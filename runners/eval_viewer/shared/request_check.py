"""Every callback request checked against what the page sends, before any callback runs.

``refuse_what_the_page_never_sends`` answers a callback request that is not as the page sends it with an empty 204
(what Dash's ``PreventUpdate`` gives): each value must have the kind the page sends for its component and property,
as the features declare it (their ``SENDS``, joined in ``app.PAGE_SENDS``; ``sends.py`` has the kinds). Values whose
callback says in place what is wrong with them (an idx, the grid's request for rows, a view's name) are left to it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Optional

import flask
from dash import Dash

from runners.eval_viewer.shared.browser_input import shown_value, storable
from runners.eval_viewer.shared.sends import PROPERTY_SENDS, Kind, Sends, anything, choice

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
        LOG.warning("refused a callback request the page never sends (for %s): answered 204", shown_value(output),
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

"""Where the page asks for pictures: by address (``PICTURE_PATH``), outside Dash's callbacks, so the browser sends
the pictures no callback values; the route checks every part of an address itself (``pictures/callbacks.py``)."""

from runners.eval_viewer.shared.sends import Sends

PICTURE_PATH = "lantern-picture"

SENDS: Sends = {}

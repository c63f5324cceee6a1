"""The seed's places of the viewer's display functions (``layout/display/display_*.py``) and of the SAM2 guide's debug
API (``debug_utils.py``); the viewer itself lives in ``runners/eval_viewer/``."""

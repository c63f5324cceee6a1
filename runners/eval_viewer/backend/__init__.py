"""The seed's place of ``load_debug_outputs`` (``initialization.py``); the viewer reads runs in ``shared/``."""

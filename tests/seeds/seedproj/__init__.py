"""A user's project built from the seeds' own code: the five example debuggers of ``debugger_examples.md``, one
file each, and its configuration example, pasted as written (``tests/seeds/test_debugger_examples.py`` checks
that they are the seed's text, character for character, and runs them with ``main.py``)."""

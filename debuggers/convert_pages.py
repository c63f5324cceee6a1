"""``python -m debuggers.convert_pages DEBUGGER_DIR [--trust-pickles]``: the command's first name, kept because run
notes and earlier messages cite it; the conversion is ``debuggers.pages.convert``."""

import sys

from debuggers.pages.convert import main

if __name__ == "__main__":
    sys.exit(main())

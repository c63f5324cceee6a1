"""``python -m runners.eval_viewer.export --run RUN --idx 3 7 12 --out report.html``."""

import sys

from runners.eval_viewer.export.report import main

sys.exit(main())

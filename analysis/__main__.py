"""``python -m analysis``: the padding workbench's command line (see :mod:`analysis.cli`)."""

import sys

from analysis.cli import main

if __name__ == "__main__":
    sys.exit(main())

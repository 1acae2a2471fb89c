"""``python -m monitor`` is ``loopwatch``."""

import sys

from monitor.cli import main

sys.exit(main())

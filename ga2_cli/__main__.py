"""``python -m ga2_cli ARGS`` is ``ga2 ARGS``."""

import sys

from . import main

sys.exit(main())

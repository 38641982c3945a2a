"""``python -m taospec``."""

import sys

from taospec.cli import main

sys.exit(main())

"""``python -m courtier``."""

import sys

from courtier.cli.main import main

sys.exit(main())

"""``python -m courtier.testweb [flags]``: the same as ``courtier testweb serve [flags]``."""

import sys

from courtier.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["testweb", "serve", *sys.argv[1:]]))

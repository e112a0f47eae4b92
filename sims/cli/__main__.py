"""``python -m sims.cli`` runs the ``fedmarket`` command."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())

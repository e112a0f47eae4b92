"""``python -m proofs``: the theorem report (same as ``fedmarket prove``)."""

import sys

from sims.cli import main

if __name__ == "__main__":
    sys.exit(main(["prove", *sys.argv[1:]]))

"""``python -m capplan`` runs the command line."""

import sys

from capplan.cli import main

sys.exit(main())

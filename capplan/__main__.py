"""``python -m capplan`` runs the command line."""

import sys

try:
    from capplan.cli import main
except KeyboardInterrupt:  # Ctrl-C while starting up: the documented "interrupted" path
    print("interrupted", file=sys.stderr)
    sys.exit(1)

sys.exit(main())

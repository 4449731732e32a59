"""``python -m capplan`` runs the command line."""

import os
import sys

try:
    from capplan.cli import main
except KeyboardInterrupt:  # Ctrl-C while starting up: the documented "interrupted" path
    print("interrupted", file=sys.stderr)
    sys.exit(1)

code = main()
# A plan of 100k+ replicas is millions of objects; freeing them one by one at exit takes seconds that
# --time-limit must cover. Everything is written (outputs atomically, before main returns): flush the
# standard streams and leave without the teardown.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)

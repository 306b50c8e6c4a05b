"""`python -m ops.cli`: the `umavez` command."""

import sys

from ops.cli import main

sys.exit(main())

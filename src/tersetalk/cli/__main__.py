"""``python -m tersetalk.cli``: the ``tersetalk`` command."""

import sys

from tersetalk.cli import main

sys.exit(main())

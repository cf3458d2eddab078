import sys

from tersetalk.cli import main

sys.exit(main())

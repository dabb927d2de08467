import sys

from reload_lint.cli import main

sys.exit(main())

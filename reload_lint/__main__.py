"""`python -m reload_lint`.

`python -m` puts the current directory first on sys.path. Run inside the audited project, a
file there named like a module reload-lint imports later (`ast.py`, `tokenize.py`, `json.py`)
would be imported, that is executed, instead of the real one: the audited code must never run.
The entry is dropped before anything else is imported; reload_lint itself is already loaded
and finds its submodules through its package path.
"""

import os
import sys

if sys.path and sys.path[0] in ("", os.getcwd()) and not getattr(sys.flags, "safe_path", False):
    del sys.path[0]

from reload_lint.cli import main

sys.exit(main())

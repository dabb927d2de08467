"""Fixes for findings: libcst codemods with ruff's conventions (`check --fix`,
`--unsafe-fixes`, `--diff`), and manual recipes where no codemod applies.

The analysis parses with CPython's `ast` (positions and records only, several times faster
than libcst on the audited trees); the rewrite uses libcst, which prints back every byte it
parsed, so a fix changes the edited statements, the imports it adds and the helper it appends,
and nothing else.

- model.py     the remedy record (applicability, patch, sha256, recipe)
- locate.py    the store statement of a finding (`ast`)
- plan.py      which shape each finding gets; the statements that replace a store
- keep.py / register.py / rebuilt.py / latebind.py   one module per fix shape
- rewrite.py   libcst on the statement, the unified diff
- engine.py    every finding's remedy; validation by parse and re-audit of a patched copy
- validate.py  the patched copy
- tree.py      what the audited tree offers (`replace_parameter` and its signature)
- recipes.py   manual recipes
- command.py   `check --fix / --unsafe-fixes / --diff` and ruff's summary lines
- render.py    the one fix text; SARIF `fixes`
"""

#: the value `check --diff` takes when given no revision (the fixes' diff, as in ruff)
FIX_DIFF = "\0fixes"

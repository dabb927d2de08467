"""The exit codes, a contract (docs/cli.md); cli/parser.py and the subcommands both read them here.

DESCRIPTIONS is the one wording of that contract: `check --help` prints it, and the exit-code
tables of docs/cli.md and docs/bad-input.md start each row with it
(tests/unit/test_exit_contract.py).
"""

EXIT_CLEAN = 0  # nothing fails the gate and every file was analysed
EXIT_FINDINGS = 1  # a finding fails the gate (or, with --strict-baseline, stale baseline entries)
EXIT_ERROR = 2  # usage, configuration or internal error; one line on stderr
EXIT_INCOMPLETE = 3  # nothing fails the gate, but some files could not be analysed (RL9xx rows)

DESCRIPTIONS = (
    (
        EXIT_CLEAN,
        "clean: nothing fails the gate and every file was analysed: no findings, or only "
        "warnings (no apply-time reader found), baselined, suppressed or allowlisted ones",
    ),
    (
        EXIT_FINDINGS,
        "a finding fails the gate: its apply-time reader was found (any finding with "
        "--strict), or a suppression comment is malformed or unused (RL904, RL905); or "
        "--strict-baseline found stale entries. Files that could not be analysed do not "
        "change this",
    ),
    (EXIT_ERROR, "usage, configuration or internal error (one line on stderr)"),
    (
        EXIT_INCOMPLETE,
        "incomplete: nothing fails the gate, but some files could not be analysed (RL9xx "
        "rows: a syntax error, an unreadable file, a named file that was not analysed, an "
        "analysis that did not complete)",
    ),
)

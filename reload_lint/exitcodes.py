"""The exit codes, a contract (docs/cli.md); cli.py and the subcommands both read them here."""

EXIT_CLEAN = 0  # no findings (or only baselined / suppressed ones)
EXIT_FINDINGS = 1  # findings (or, with --strict-baseline, stale baseline entries)
EXIT_ERROR = 2  # usage, configuration or internal error; one line on stderr
EXIT_INCOMPLETE = 3  # nothing found, but some files could not be analysed (RL9xx rows)

DESCRIPTIONS = (
    (
        EXIT_CLEAN,
        "clean: no findings, or only warnings (no apply-time reader found), baselined or "
        "suppressed ones",
    ),
    (
        EXIT_FINDINGS,
        "findings with an apply-time reader found (any finding with --strict), or "
        "--strict-baseline found stale entries",
    ),
    (EXIT_ERROR, "usage, configuration or internal error (one line on stderr)"),
    (EXIT_INCOMPLETE, "no findings, but some files could not be analysed (RL9xx rows)"),
)

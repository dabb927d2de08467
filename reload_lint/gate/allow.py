"""`reload-lint allow FINGERPRINT --reason TEXT`: append an allowlist entry for a finding.

Input: the run's findings, fingerprints, a reason and link, an allowlist path. Output: the
allowlist file with the new entries appended (atomically), and their count.

The finding must be one the same run reports (an unknown or stale fingerprint is refused),
the entry is keyed by the line-free site (rule, path, symbol, target) when that names exactly
this finding, else by its fingerprint, and the file is rewritten atomically with everything
already in it (comments, order, spacing) kept byte for byte: the new entry is appended.
The result is parsed with the allowlist loader before anything is written, so a file that
`check` would refuse is never produced.
"""

from __future__ import annotations

from pathlib import Path

from reload_lint.errors import ReloadLintError
from reload_lint.findings import Finding

HEADER = (
    "# reload-lint allowlist: sites accepted on purpose, each with the reason it is safe.\n"
    "# Entries match by rule + path + enclosing symbol + stored target (or by fingerprint),\n"
    "# never by line. `reload-lint allow FINGERPRINT --reason ...` appends here.\n"
)


def toml_string(text: str) -> str:
    """A TOML basic string (one line): quotes, backslashes and control characters escaped."""
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def entry_text(f: Finding, reason: str, link: str, by_fingerprint: bool) -> str:
    lines = [
        f"# {f.path}:{f.line}: {f.rule} {f.message}".replace("\n", " ")[:300],
        "[[allow]]",
    ]
    if by_fingerprint:
        lines.append(f"fingerprint = {toml_string(f.fingerprint)}")
    else:
        lines.append(f"# fingerprint {f.fingerprint}")
        lines += [
            f"rule = {toml_string(f.rule)}",
            f"path = {toml_string(f.path)}",
            f"symbol = {toml_string(f.symbol)}",
            f"target = {toml_string(f.target)}",
        ]
    lines += [f"reason = {toml_string(reason)}", f"link = {toml_string(link)}"]
    return "\n".join(lines) + "\n"


def append_entries(
    path: Path, findings: list[Finding], everything: list[Finding], reason: str, link: str | None
) -> int:
    """Append one entry per finding to the allowlist at `path` (created if missing); return
    how many were appended. `everything` is the whole run, used to check that a site key
    names only the finding it is written for."""
    from reload_lint.fsutil import atomic_write_bytes
    from reload_lint.gate.suppress import AllowEntry, load_allowlist

    if not reason.strip():
        raise ReloadLintError("--reason must say why the site is safe (it is required)")
    try:
        old = path.read_bytes() if path.exists() else None
    except OSError as exc:
        raise ReloadLintError(f"{path}: cannot read allowlist: {exc.strerror or exc}") from None
    existing = load_allowlist(path) if old is not None else []
    try:
        text = old.decode("utf-8") if old is not None else HEADER
    except UnicodeDecodeError:
        raise ReloadLintError(f"{path}: allowlist is not valid UTF-8") from None
    added = 0
    for f in findings:
        if any(e.matches(f) for e in existing):
            continue
        site = AllowEntry("", "", "", rule=f.rule, path=f.path, symbol=f.symbol, target=f.target)
        by_fp = sum(1 for g in everything if site.matches(g)) != 1
        block = entry_text(f, reason.strip(), (link or f"{f.path}:{f.line}").strip(), by_fp)
        if not text.endswith("\n"):
            text += "\n"
        text += "\n" + block
        added += 1
    if not added:
        return 0
    _check_parses(path, text)
    atomic_write_bytes(path, text.encode("utf-8"))
    return added


def _check_parses(path: Path, text: str) -> None:
    import tempfile

    from reload_lint.gate.suppress import load_allowlist

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / path.name
        probe.write_text(text, encoding="utf-8")
        try:
            load_allowlist(probe, display=str(path))
        except ReloadLintError as exc:  # never write what `check` would refuse
            raise ReloadLintError(
                f"{path}: not written, the result would not load: {exc}"
            ) from None

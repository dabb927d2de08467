"""Input side of ``confirm``: read a findings file and choose the sites (``--site SELECTOR``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from reload_lint.errors import ReloadLintError
from reload_lint.findings import Finding

_RULE = re.compile(r"^RL\d{3}$", re.IGNORECASE)
_FP = re.compile(r"^[0-9a-f]{6,40}$", re.IGNORECASE)
_PATH_LINE = re.compile(r"^(?P<path>.+):(?P<line>\d+)$")


def load_findings(path: str | Path) -> list[Finding]:
    """Findings from a ``reload-lint check --format json`` document; one-line errors otherwise."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReloadLintError(f"{p}: no such findings file") from None
    except UnicodeDecodeError:
        raise ReloadLintError(f"{p}: cannot read findings: not valid UTF-8") from None
    except OSError as exc:
        raise ReloadLintError(f"{p}: cannot read findings: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReloadLintError(f"{p}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if isinstance(data, list):  # a bare list of findings is accepted too
        raw = data
    elif isinstance(data, dict) and isinstance(data.get("findings"), list):
        raw = data["findings"]
    else:
        raise ReloadLintError(f"{p}: not a findings document (no 'findings' list)")
    out: list[Finding] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ReloadLintError(f"{p}: finding #{i} is not an object")
        missing = [k for k in ("rule", "path", "line") if k not in item]
        if missing:
            raise ReloadLintError(f"{p}: finding #{i} lacks {', '.join(missing)}")
        try:
            f = Finding.from_json(item)
        except (TypeError, ValueError, KeyError) as exc:
            raise ReloadLintError(f"{p}: finding #{i} is malformed: {exc}") from None
        if not f.fingerprint:
            f.fingerprint = _fallback_fingerprint(f)
        out.append(f)
    return out


def load_patches(path: str | Path) -> dict[str, tuple[str, str | None, str]]:
    """fingerprint -> (unified diff, sha256, label) of each finding's codemod (``remedy``), read
    from the same findings document (already validated by ``load_findings``)."""
    from reload_lint.confirm.patched import finding_patch

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    raw = data if isinstance(data, list) else data.get("findings", [])
    out = {}
    for item in raw:
        got = finding_patch(item) if isinstance(item, dict) else None
        if got is not None and item.get("fingerprint"):
            out[item["fingerprint"]] = got
    return out


def _fallback_fingerprint(f: Finding) -> str:
    import hashlib

    raw = "\x1f".join([f.rule, f.path, f.symbol, f.target, "0"])
    return hashlib.sha256(raw.encode()).hexdigest()[:20]


def selector_matches(selector: str, f: Finding) -> bool:
    s = selector.strip()
    if not s:
        return False
    if _RULE.match(s):
        return f.rule.upper() == s.upper()
    m = _PATH_LINE.match(s)
    if m:
        line = int(m.group("line"))
        path = m.group("path").replace("\\", "/")
        if not (f.path == path or f.path.endswith("/" + path) or path.endswith("/" + f.path)):
            return False
        return f.line <= line <= max(f.end_line, f.line)
    if _FP.match(s) and f.fingerprint.lower().startswith(s.lower()):
        return True
    return False


def select_sites(findings: list[Finding], selectors: list[str]) -> list[Finding]:
    """Findings matching any selector (all findings when none is given), in file order."""
    if not selectors:
        chosen = list(findings)
    else:
        unmatched = [s for s in selectors if not any(selector_matches(s, f) for f in findings)]
        if unmatched:
            raise ReloadLintError(f"--site {unmatched[0]}: matches no finding in the findings file")
        chosen = [f for f in findings if any(selector_matches(s, f) for s in selectors)]
    chosen = [f for f in chosen if not f.suppressed]
    seen: set[str] = set()
    unique = []
    for f in chosen:
        if f.fingerprint in seen:
            continue
        seen.add(f.fingerprint)
        unique.append(f)
    return unique

"""Inline suppressions and allowlists: the "accepted, because" half of the gate.

Input: source texts (their comments), allowlist TOML files and findings. Output: the
suppression comments per file, the findings marked accepted (with the reason), and RL904 /
RL905 findings for malformed or unused comments.

Inline::

    self.perm = torch.argsort(g_idx)  # reload-lint: ignore[RL101] -- rebuilt per call, never captured

The reason after `--` is mandatory. A comment applies to the statement it trails (any line of
the reported span) or, when it stands alone, to the next code line below its comment block.
A malformed comment is an RL904 finding; a well-formed one that matched nothing is RL905.

Allowlists (TOML files; bundled ones in allowlists/) accept sites in a codebase without touching its sources; each
entry has a reason and a link and matches by fingerprint or by path + symbol + target.

Baseline ("fix later") lives in baseline.py: a different thing on purpose.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.errors import ReloadLintError
from reload_lint.findings import Finding, compute_fingerprints, normalize_target
from reload_lint.rules import RULES

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[no-redef]

MARKER = "reload-lint:"

# `# reload-lint: ignore[RL101, RL102] -- reason`, possibly after another tool's directive in
# the same comment (a `noqa` first, then the marker). The marker's `#` opens the comment or
# follows whitespace or another `#`: a marker quoted in prose (between backticks or quotes, as
# in the first line here) is documentation, not a directive.
_DIRECTIVE = re.compile(r"(?:^|(?<=[\s#]))#\s*reload-lint\s*:(?P<rest>.*)$")
_IGNORE = re.compile(
    r"^\s*ignore\s*(?:\[(?P<codes>[^\]]*)\])?\s*(?P<sep>--)?(?P<reason>.*)$",
)
_CODE = re.compile(r"^(?:RL\d{1,3}|ALL)$")


@dataclass
class Suppression:
    """One `# reload-lint:` comment. `error` is set (and `codes` may be empty) when malformed."""

    line: int
    column: int
    codes: list[str]
    reason: str
    text: str
    error: str | None = None
    standalone: bool = False
    # Lines this comment applies to, filled by scan_suppressions.
    applies_to: tuple[int, ...] = ()
    used: bool = field(default=False, compare=False)

    def matches(self, code: str) -> bool:
        return any(c == "ALL" or code.startswith(c) for c in self.codes)


def _parse_comment(comment: str) -> tuple[list[str], str, str | None] | None:
    """(codes, reason, error) for a comment holding the marker; None if it holds none."""
    m = _DIRECTIVE.search(comment)
    if m is None:
        return None
    rest = m.group("rest")
    im = _IGNORE.match(rest)
    if im is None:
        word = rest.strip().split(" ")[0] or "(nothing)"
        return [], "", f"unknown directive `{word}`; expected `ignore[RLxxx] -- <reason>`"
    raw_codes = im.group("codes")
    reason = im.group("reason").strip()
    if raw_codes is None:
        return [], reason, "no rule codes; write `ignore[RLxxx] -- <reason>`"
    codes = [c.strip().upper() for c in raw_codes.split(",") if c.strip()]
    if not codes:
        return [], reason, "empty rule list in `ignore[]`"
    bad = [c for c in codes if not _CODE.match(c) or not _known_code(c)]
    if bad:
        return codes, reason, f"unknown rule code `{bad[0]}`"
    if im.group("sep") is None:
        return codes, reason, "missing reason; write `-- <why this is safe>` after the codes"
    if not reason:
        return codes, reason, "empty reason after `--`"
    return codes, reason, None


def _known_code(code: str) -> bool:
    return code == "ALL" or any(k.startswith(code) for k in RULES)


def _comments_tokenize(text: str) -> list[tuple[int, int, str, bool]] | None:
    out: list[tuple[int, int, str, bool]] = []
    last_code_line = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                line, col = tok.start
                out.append((line, col, tok.string, last_code_line != line))
            elif tok.type not in (
                tokenize.NL,
                tokenize.NEWLINE,
                tokenize.INDENT,
                tokenize.DEDENT,
                tokenize.ENCODING,
                tokenize.ENDMARKER,
            ):
                last_code_line = tok.end[0]
    except (tokenize.TokenError, IndentationError, SyntaxError, ValueError):
        return None
    return out


def _comments_fallback(lines: list[str]) -> list[tuple[int, int, str, bool]]:
    """Line scan for files tokenize rejects: good enough to report and honour comments."""
    out = []
    for i, src in enumerate(lines, 1):
        idx = src.find("#")
        while idx >= 0:
            if MARKER in src[idx:]:
                out.append((i, idx, src[idx:].rstrip("\r\n"), not src[:idx].strip()))
                break
            idx = src.find("#", idx + 1)
    return out


def _is_code(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith("#")


def scan_suppressions(text: str) -> list[Suppression]:
    """Every `# reload-lint:` comment in `text`, parsed, with the lines each one covers."""
    if MARKER not in text:
        return []
    lines = text.splitlines()
    comments = _comments_tokenize(text)
    if comments is None:
        comments = _comments_fallback(lines)
    out: list[Suppression] = []
    for line, col, comment, standalone in comments:
        parsed = _parse_comment(comment)
        if parsed is None:
            continue
        codes, reason, error = parsed
        if standalone:
            # Applies to the next code line below the comment block.
            nxt = line
            while nxt < len(lines) and not _is_code(lines[nxt]):
                nxt += 1
            applies = (nxt + 1,) if nxt < len(lines) else ()
        else:
            applies = (line,)
        out.append(
            Suppression(
                line=line,
                column=col + 1,
                codes=codes,
                reason=reason,
                text=comment.strip(),
                error=error,
                standalone=standalone,
                applies_to=applies,
            )
        )
    return out


def _covers(s: Suppression, f: Finding) -> bool:
    lo, hi = f.line, max(f.line, f.end_line)
    return any(lo <= ln <= hi for ln in s.applies_to)


def apply_suppressions(
    findings: list[Finding],
    suppressions: dict[str, list[Suppression]],
    *,
    enabled=None,
    paths: set[str] | None = None,
) -> list[Finding]:
    """Mark findings covered by an inline suppression; return new RL904/RL905 findings.

    `enabled(path, code) -> bool` says whether a rule runs on a path: a suppression is only
    reported unused when every code it names is enabled there (as ruff does for RUF100).
    `paths` restricts which files' comments are reported (pre-commit mode).
    """
    for f in findings:
        if f.suppressed is not None:
            continue
        for s in suppressions.get(f.path, ()):
            if s.error is None and s.matches(f.rule) and _covers(s, f):
                f.suppressed = s.reason
                s.used = True
                break
    meta: list[Finding] = []
    for path in sorted(suppressions):
        if paths is not None and path not in paths:
            continue
        for s in suppressions[path]:
            if s.error is not None:
                meta.append(_meta("RL904", path, s, f"malformed suppression: {s.error}"))
            elif not s.used:
                if enabled is not None and not all(
                    _code_enabled(enabled, path, c) for c in s.codes
                ):
                    continue
                what = ", ".join(s.codes)
                meta.append(_meta("RL905", path, s, f"unused suppression: no {what} finding here"))
    compute_fingerprints(meta)
    return meta


def _code_enabled(enabled, path: str, code: str) -> bool:
    if code == "ALL":
        return True
    return any(enabled(path, k) for k in RULES if k.startswith(code))


def _meta(rule: str, path: str, s: Suppression, message: str) -> Finding:
    return Finding(
        rule=rule,
        path=path,
        line=s.line,
        column=s.column,
        end_line=s.line,
        symbol="",
        target=s.text,
        message=message,
        severity=RULES[rule].severity,
        confidence="high",
        contract="",
        snippet=s.text,
    )


# --------------------------------------------------------------------------- allowlists


@dataclass(frozen=True)
class AllowEntry:
    source: str  # "allowlists/vllm.toml#3"
    reason: str
    link: str
    fingerprint: str | None = None
    rule: str | None = None
    path: str | None = None
    symbol: str | None = None
    target: str | None = None

    def matches(self, f: Finding) -> bool:
        if self.fingerprint is not None:
            return f.fingerprint == self.fingerprint
        if self.rule is not None and not f.rule.startswith(self.rule):
            return False
        return (
            f.path == self.path
            and f.symbol == self.symbol
            and normalize_target(f.target) == normalize_target(self.target or "")
        )


_ENTRY_KEYS = {"fingerprint", "rule", "path", "symbol", "target", "reason", "link"}


def load_allowlist(path: Path, display: str | None = None) -> list[AllowEntry]:
    """Parse one allowlist TOML; any problem is a one-line ReloadLintError (exit 2).

    `display` names the file in messages and in suppression reasons (default: `path`).
    """
    name = display or str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ReloadLintError(f"{path}: cannot read allowlist: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ReloadLintError(f"{path}: allowlist is not valid UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ReloadLintError(f"{path}: invalid allowlist TOML: {exc}") from None
    unknown = sorted(set(data) - {"allow", "meta"})
    if unknown:
        raise ReloadLintError(f"{path}: unknown top-level key `{unknown[0]}` in allowlist")
    entries = data.get("allow", [])
    if not isinstance(entries, list):
        raise ReloadLintError(f"{path}: `allow` must be an array of tables ([[allow]])")
    out: list[AllowEntry] = []
    for i, e in enumerate(entries, 1):
        where = f"{name}: [[allow]] #{i}"
        if not isinstance(e, dict):
            raise ReloadLintError(f"{where} must be a table")
        bad = sorted(set(e) - _ENTRY_KEYS)
        if bad:
            raise ReloadLintError(f"{where}: unknown key `{bad[0]}`")
        for k, v in e.items():
            if not isinstance(v, str):
                raise ReloadLintError(f"{where}: `{k}` must be a string")
        for k in ("reason", "link"):
            if not e.get(k, "").strip():
                raise ReloadLintError(f"{where}: `{k}` is required")
        if "fingerprint" not in e:
            missing = [k for k in ("path", "symbol", "target") if k not in e]
            if missing:
                raise ReloadLintError(
                    f"{where}: give `fingerprint`, or `path`, `symbol` and `target` "
                    f"(missing `{missing[0]}`)"
                )
        if "rule" in e and not _known_code(e["rule"].upper()):
            raise ReloadLintError(f"{where}: unknown rule code `{e['rule']}`")
        out.append(
            AllowEntry(
                source=f"{name}#{i}",
                reason=e["reason"].strip(),
                link=e["link"].strip(),
                fingerprint=e.get("fingerprint"),
                rule=e["rule"].upper() if "rule" in e else None,
                path=e.get("path"),
                symbol=e.get("symbol"),
                target=e.get("target"),
            )
        )
    return out


def apply_allowlists(findings: list[Finding], entries: list[AllowEntry]) -> set[str]:
    """Mark allowlisted findings suppressed; return the sources of entries that matched."""
    used: set[str] = set()
    for f in findings:
        if f.suppressed is not None:
            continue
        for e in entries:
            if e.matches(f):
                f.suppressed = f"allowlisted ({e.source}): {e.reason}"
                used.add(e.source)
                break
    return used

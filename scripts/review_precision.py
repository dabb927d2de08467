#!/usr/bin/env python3
"""Join a findings JSON with a reviewer's label file and measure precision.

    python3 scripts/review_precision.py FINDINGS.json LABELS.toml [--check]
        [--markdown OUT.md] [--skeleton] [--sample-list] [--sources ROOT]

A label file (TOML, see docs/reviews/README.md) holds one `[[finding]]` entry per reviewed
finding: `label` (real / safe / masked / unsure), `reason`, `cites` (file:line in the audited
sources), the finding's `confidence` when it was labelled, and the keys used to find the
finding again in a later run:

0. the recorded line with the same fingerprint or site key first (the audited sources are fixed;
   a fingerprint's occurrence index can shift to another store of the same target);
1. `fingerprint`, exact;
2. the line-free site key (rule, path, symbol, target), for a changed fingerprint; when one
   site key has several labels, the one whose recorded `line` is nearest wins, among labels not
   already matched on their own line and at most NEAR (10) lines away;
3. a moved location: the label's recorded `path:line` is the finding's location or one of its
   trace steps, with the same attribute path (`mod.x` in a helper is `layer.x` at its caller: the
   engine moved the report from a shared helper to its caller and kept the helper in the trace).
   Rule changes are tolerated here.

Matches by 2 and 3 are listed so that a reviewer can confirm them. Findings with no label are
listed too; with `--check` the exit status is 1 if any exists (2 on bad input).

An optional `[sample]` table (seed, size, exclude) restricts the measurement to a random sample:
each eligible finding gets the rank sha256("<seed>|<rule>|<path>|<line>|<target>") and the
`size` lowest ranks are the sample. The rank of a finding does not depend on the other
findings, so a finding that stays in a later run keeps its place, and the ones the engine
removed are replaced by the next ranks. `exclude` lists `path:line` sites left out (the known
table of an earlier review).

With `--sources ROOT` (the unpacked release the cites refer to) every cite is checked: the file
must exist under ROOT and have that line; bad cites are listed and, with `--check`, fail the run.

Precision is real / (real + safe): `masked` counts as real (the storage does move) in the
headline number and is also shown excluded; `unsure` is left out of both; also per confidence
and over the gate-failing findings (a `reader`). Optional label fields `class` and
`duplicate_of` are counted; a label whose finding was folded into another (`also`) is named so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

LABELS = ("real", "masked", "safe", "unsure")
# A label found by site key alone applies to a finding at most this many lines away: farther,
# it is another store of the same target in the same function and needs its own label.
NEAR = 10
CONFIDENCES = ("high", "medium", "low")


class InputError(Exception):
    """Bad input: reported as one line, exit status 2."""


@dataclass
class Label:
    label: str
    reason: str
    cites: list[str]
    rule: str
    path: str
    symbol: str
    target: str
    line: int
    fingerprint: str = ""
    confidence: str = ""
    cause: str = ""
    index: int = 0
    klass: str = ""  # `class` in the file: which class of safe finding (free text)
    duplicate_of: str = ""  # fingerprint of the finding that reports the same storage

    @property
    def site(self) -> tuple[str, str, str, str]:
        return (self.rule, self.path, self.symbol, self.target)


@dataclass
class Match:
    finding: dict
    label: Label | None
    how: str  # "fingerprint" | "site" | "trace" | ""


@dataclass
class Review:
    meta: dict
    sample: dict | None
    labels: list[Label] = field(default_factory=list)


def site_key(f: dict) -> tuple[str, str, str, str]:
    return (f["rule"], f["path"], f.get("symbol", ""), f.get("target", ""))


def load_findings(path: str) -> list[dict]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: cannot read findings JSON: {e}") from e
    findings = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(findings, list):
        raise InputError(f"{path}: no `findings` list (expected reload-lint --format json)")
    for i, f in enumerate(findings):
        for k in ("rule", "path", "line"):
            if k not in f:
                raise InputError(f"{path}: finding {i} has no `{k}`")
    return findings


def load_review(path: str) -> Review:
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise InputError(f"{path}: cannot read label file: {e}") from e
    review = Review(meta=data.get("review", {}), sample=data.get("sample"))
    for i, e in enumerate(data.get("finding", [])):
        where = f"{path}: [[finding]] {i + 1}"
        for k in ("label", "reason", "rule", "path", "target", "line"):
            if k not in e:
                raise InputError(f"{where}: missing `{k}`")
        if e["label"] not in LABELS:
            raise InputError(f"{where}: label {e['label']!r} is not one of {', '.join(LABELS)}")
        cites = e.get("cites", [])
        if not isinstance(cites, list) or not all(isinstance(c, str) for c in cites):
            raise InputError(f"{where}: `cites` must be a list of 'path:line' strings")
        review.labels.append(
            Label(
                label=e["label"],
                reason=e["reason"],
                cites=cites,
                rule=e["rule"],
                path=e["path"],
                symbol=e.get("symbol", ""),
                target=e["target"],
                line=int(e["line"]),
                fingerprint=e.get("fingerprint", ""),
                confidence=e.get("confidence", ""),
                cause=e.get("cause", ""),
                index=i,
                klass=str(e.get("class", "")),
                duplicate_of=str(e.get("duplicate_of", "")),
            )
        )
    if review.sample is not None:
        for k in ("seed", "size"):
            if k not in review.sample:
                raise InputError(f"{path}: [sample] needs `{k}`")
    return review


def sample_rank(seed: object, f: dict) -> str:
    key = f"{seed}|{f['rule']}|{f['path']}|{f['line']}|{f.get('target', '')}"
    return hashlib.sha256(key.encode()).hexdigest()


def draw_sample(findings: list[dict], sample: dict) -> list[dict]:
    """The `size` eligible findings with the lowest rank, in rank order."""
    exclude = set(sample.get("exclude", []))
    eligible = [f for f in findings if f"{f['path']}:{f['line']}" not in exclude]
    eligible.sort(key=lambda f: sample_rank(sample["seed"], f))
    return eligible[: int(sample["size"])]


def attr_path(target: str) -> str:
    """`mod.w13_qweight` -> `w13_qweight`: a helper names the module after its own parameter, the
    caller after its own, so a moved location compares the attribute path only."""
    return target.split(".", 1)[1] if "." in target else target


def join(findings: list[dict], labels: list[Label]) -> list[Match]:
    """Pair each finding with a label. The audited sources never change, so a label whose
    recorded line is the finding's line is the strongest evidence: a fingerprint carries an
    occurrence index, and when the engine starts reporting a second store of the same target
    earlier in the function, the old fingerprint moves to the new store."""
    by_fp: dict[str, Label] = {lb.fingerprint: lb for lb in labels if lb.fingerprint}
    by_site: dict[tuple, list[Label]] = {}
    by_place: dict[tuple[str, int, str], list[Label]] = {}
    for lb in labels:
        by_site.setdefault(lb.site, []).append(lb)
        by_place.setdefault((lb.path, lb.line, attr_path(lb.target)), []).append(lb)
    result: list[Match | None] = [None] * len(findings)
    claimed: set[int] = set()

    def take(i: int, lb: Label, how: str) -> None:
        result[i] = Match(findings[i], lb, how)
        claimed.add(id(lb))

    # 1. same fingerprint, same line
    for i, f in enumerate(findings):
        lb = by_fp.get(f.get("fingerprint", ""))
        if lb is not None and lb.line == f["line"] and lb.site == site_key(f):
            take(i, lb, "fingerprint")
    # 2. same site key, same line (the fingerprint changed)
    for i, f in enumerate(findings):
        if result[i] is None:
            for lb in by_site.get(site_key(f), []):
                if lb.line == f["line"] and id(lb) not in claimed:
                    take(i, lb, "site")
                    break
    # 3. same fingerprint, another line (the report moved within the function)
    for i, f in enumerate(findings):
        lb = by_fp.get(f.get("fingerprint", ""))
        if result[i] is None and lb is not None and id(lb) not in claimed:
            take(i, lb, "fingerprint")
    # 4. the label's place is the finding's own location (the rule changed)
    for i, f in enumerate(findings):
        if result[i] is None:
            for lb in by_place.get((f["path"], f["line"], attr_path(f.get("target", ""))), []):
                if id(lb) not in claimed:
                    take(i, lb, "trace")
                    break
    # 5. same site key, nearest recorded line; 6. a moved location (see the module docstring)
    for i, f in enumerate(findings):
        if result[i] is not None:
            continue
        cands = [
            c
            for c in by_site.get(site_key(f), [])
            if id(c) not in claimed and abs(c.line - f["line"]) <= NEAR
        ]
        if cands:
            best = min(cands, key=lambda c: (abs(c.line - f["line"]), c.index))
            result[i] = Match(f, best, "site")
            continue
        places = [(f["path"], f["line"])] + [
            (s.get("path", ""), s.get("line", 0)) for s in f.get("trace", [])
        ]
        hit = None
        for p, ln in places:
            got = by_place.get((p, ln, attr_path(f.get("target", ""))))
            if got:
                hit = got[0]
                break
        result[i] = Match(f, hit, "trace" if hit else "")
    return [m for m in result if m is not None]


def folded_into(findings: list[dict]) -> dict[str, str]:
    """Fingerprint of each finding folded into another (schema 1.1 `also`) -> its host's."""
    out: dict[str, str] = {}
    for f in findings:
        for a in f.get("also") or []:
            if isinstance(a, dict) and a.get("fingerprint"):
                out[a["fingerprint"]] = f.get("fingerprint", "")
    return out


def ratio(num: int, den: int) -> str:
    return f"{num}/{den} = {100.0 * num / den:.1f}%" if den else "n/a (no real or safe label)"


def precision(matches: list[Match]) -> dict[str, str]:
    """Headline ratios. `gate` is over the findings that fail the gate: those whose `reader`
    field (schema 1.1) names an apply-time read."""
    c = Counter(m.label.label for m in matches if m.label)
    hi = Counter(
        m.label.label for m in matches if m.label and m.finding.get("confidence") == "high"
    )
    gate = Counter(m.label.label for m in matches if m.label and m.finding.get("reader"))
    return {
        "overall": ratio(c["real"] + c["masked"], c["real"] + c["masked"] + c["safe"]),
        "masked_excluded": ratio(c["real"], c["real"] + c["safe"]),
        "high": ratio(hi["real"] + hi["masked"], hi["real"] + hi["masked"] + hi["safe"]),
        "high_masked_excluded": ratio(hi["real"], hi["real"] + hi["safe"]),
        "gate": ratio(gate["real"] + gate["masked"], gate["real"] + gate["masked"] + gate["safe"]),
        "gate_masked_excluded": ratio(gate["real"], gate["real"] + gate["safe"]),
    }


def bad_cites(labels: list[Label], root: str) -> list[str]:
    """Cites whose file is missing under `root` or shorter than the cited line."""
    out = []
    lengths: dict[str, int | None] = {}
    for lb in labels:
        for cite in lb.cites:
            path, _, line = cite.rpartition(":")
            if not path or not line.isdigit():
                out.append(f"{lb.path}:{lb.line}: cite {cite!r} is not 'path:line'")
                continue
            if path not in lengths:
                try:
                    text = (Path(root) / path).read_text(encoding="utf-8", errors="replace")
                    lengths[path] = len(text.splitlines())
                except OSError:
                    lengths[path] = None
            n = lengths[path]
            if n is None:
                out.append(f"{lb.path}:{lb.line}: cite {cite} names a file not under {root}")
            elif not 1 <= int(line) <= n:
                out.append(f"{lb.path}:{lb.line}: cite {cite} is past the end ({n} lines)")
    return out


def where(f: dict) -> str:
    return f"{f['path']}:{f['line']}"


def describe(f: dict) -> str:
    return f"{f.get('fingerprint', '-')} {f['rule']} {where(f)} {f.get('target', '')}"


def summary_lines(matches: list[Match], population: int, review: Review) -> list[str]:
    c = Counter(m.label.label for m in matches if m.label)
    how = Counter(m.how for m in matches if m.label)
    unl = [m for m in matches if m.label is None]
    p = precision(matches)
    lines = []
    if review.sample is not None:
        lines.append(
            f"sample: {len(matches)} of {population} findings (seed {review.sample['seed']}, "
            f"size {review.sample['size']}, {len(review.sample.get('exclude', []))} known sites "
            "excluded)"
        )
    else:
        lines.append(f"findings: {len(matches)} (all)")
    lines.append(
        f"labelled: {len(matches) - len(unl)} (by fingerprint {how['fingerprint']}, "
        f"by site key {how['site']}, by moved location {how['trace']}); unlabelled: {len(unl)}"
    )
    lines.append("labels: " + ", ".join(f"{k} {c[k]}" for k in LABELS))
    lines.append(f"precision real/(real+safe), masked counted as real: {p['overall']}")
    lines.append(f"precision, masked excluded: {p['masked_excluded']}")
    lines.append(
        f"precision, high confidence: {p['high']} (masked excluded: {p['high_masked_excluded']})"
    )
    if any("reader" in m.finding for m in matches):
        n_gate = sum(1 for m in matches if m.finding.get("reader"))
        lines.append(
            f"precision, gate-failing (a reader found, {n_gate} findings): {p['gate']} "
            f"(masked excluded: {p['gate_masked_excluded']})"
        )
    by_conf = []
    for conf in CONFIDENCES:
        cc = Counter(
            m.label.label for m in matches if m.label and m.finding.get("confidence") == conf
        )
        moved = cc["real"] + cc["masked"]
        by_conf.append(
            f"{conf}: "
            + " ".join(f"{k} {cc[k]}" for k in LABELS)
            + f" ({ratio(moved, moved + cc['safe'])})"
        )
    lines.append("by confidence: " + "; ".join(by_conf))
    classes = Counter(m.label.klass for m in matches if m.label and m.label.klass)
    if classes:
        lines.append("safe by class: " + ", ".join(f"{k} {n}" for k, n in sorted(classes.items())))
    dups = [m for m in matches if m.label and m.label.duplicate_of]
    if dups:
        reported = {m.finding.get("fingerprint") for m in matches}
        lines.append(
            f"duplicates (same storage as another finding): {len(dups)}, "
            f"{sum(1 for m in dups if m.label.duplicate_of in reported)} of them next to a "
            "finding still reported"
        )
    causes = Counter(m.label.cause for m in matches if m.label and m.label.cause)
    if causes:
        lines.append(
            "causes: "
            + ", ".join(f"{k} {n}" for k, n in sorted(causes.items(), key=lambda x: -x[1]))
        )
    triage = triage_line(matches)
    if triage:
        lines.append(triage)
    return lines


def triage_line(matches: list[Match]) -> str:
    """How the findings' own triage fields (schema 1.1) agree with the labels."""
    lab = [m for m in matches if m.label]
    if not any("masked" in m.finding for m in lab):
        return ""
    moves = {"real", "masked"}

    def count(pred) -> int:
        return sum(1 for m in lab if pred(m.label.label, m.finding))

    return (
        "triage fields vs labels: "
        f"masked said on {count(lambda k, f: k == 'masked' and f.get('masked'))} of "
        f"{count(lambda k, f: k == 'masked')} masked, and on "
        f"{count(lambda k, f: k != 'masked' and f.get('masked'))} others; "
        f"guard said on {count(lambda k, f: k == 'safe' and f.get('guard'))} of "
        f"{count(lambda k, f: k == 'safe')} safe, and on "
        f"{count(lambda k, f: k in moves and f.get('guard'))} real/masked; "
        f"no reader on {count(lambda k, f: k in moves and not f.get('reader'))} real/masked, "
        f"a reader on {count(lambda k, f: k == 'safe' and f.get('reader'))} safe"
    )


def md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(
    matches: list[Match],
    population: int,
    review: Review,
    stale: list[Label],
    folded: dict[str, str] | None = None,
) -> str:
    folded = folded or {}
    title = review.meta.get("title", "reload-lint review")
    out = [
        f"# {title}",
        "",
        "<!-- generated by scripts/review_precision.py; edit the label file -->",
    ]
    out.append("")
    for line in summary_lines(matches, population, review):
        out.append(f"- {line}")
    out.append("")
    if review.meta.get("intro"):
        out += [review.meta["intro"].strip(), ""]
    out += [
        "| # | finding | rule | confidence | label | reason (cites) |",
        "|---|---|---|---|---|---|",
    ]
    ranked = sorted(
        enumerate(matches),
        key=lambda im: (im[1].finding["path"], im[1].finding["line"], im[0]),
    )
    for n, (_, m) in enumerate(ranked, 1):
        f = m.finding
        cell = f"`{where(f)}` `{f.get('target', '')}` ({f.get('fingerprint', '-')[:10]})"
        if m.label is None:
            label, reason = "**unlabelled**", ""
        else:
            label = m.label.label
            if m.label.klass:
                label += f" (class {m.label.klass.split()[0]})"
            if m.label.duplicate_of:
                label += f", duplicate of {m.label.duplicate_of[:10]}"
            if m.how != "fingerprint":
                label += f" (by {'site key' if m.how == 'site' else 'moved location'})"
            cites = ", ".join(f"`{c}`" for c in m.label.cites)
            reason = m.label.reason + (f" ({cites})" if cites else "")
        out.append(
            f"| {n} | {md_cell(cell)} | {f['rule']} | {f.get('confidence', '')} | {label} | "
            f"{md_cell(reason)} |"
        )
    if stale:
        out += [
            "",
            "## Labels whose finding is no longer reported",
            "",
            "By cause: "
            + ", ".join(
                f"{k} {n}"
                for k, n in sorted(
                    Counter(lb.cause or lb.label for lb in stale).items(), key=lambda x: -x[1]
                )
            )
            + "."
            + (
                f" {sum(1 for lb in stale if lb.fingerprint in folded)} of them are folded into"
                " a reported finding (its `also`): the storage is still reported, once."
                if any(lb.fingerprint in folded for lb in stale)
                else ""
            ),
            "",
            "| labelled finding | rule | label | reason |",
            "|---|---|---|---|",
        ]
        for lb in stale:
            host = folded.get(lb.fingerprint)
            label = lb.label + (f", folded into {host[:10]}" if host else "")
            out.append(
                f"| `{lb.path}:{lb.line}` `{lb.target}` | {lb.rule} | {label} | "
                f"{md_cell(lb.reason)} |"
            )
    if review.meta.get("outro"):
        out += ["", review.meta["outro"].strip()]
    return "\n".join(out) + "\n"


def toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def skeleton(f: dict) -> str:
    return "\n".join(
        [
            "[[finding]]",
            f"fingerprint = {toml_str(f.get('fingerprint', ''))}",
            f"rule = {toml_str(f['rule'])}",
            f"path = {toml_str(f['path'])}",
            f"symbol = {toml_str(f.get('symbol', ''))}",
            f"target = {toml_str(f.get('target', ''))}",
            f"line = {f['line']}",
            f"confidence = {toml_str(f.get('confidence', ''))}",
            'label = ""',
            'reason = ""',
            "cites = []",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("findings", help="reload-lint check --format json output")
    ap.add_argument("labels", help="label file (TOML)")
    ap.add_argument("--check", action="store_true", help="exit 1 if a finding is unlabelled")
    ap.add_argument("--markdown", metavar="OUT", help="write the review table to OUT")
    ap.add_argument(
        "--skeleton", action="store_true", help="print [[finding]] stubs for unlabelled findings"
    )
    ap.add_argument(
        "--sample-list", action="store_true", help="print the sampled findings in rank order"
    )
    ap.add_argument("--sources", metavar="ROOT", help="check every cite against this source tree")
    args = ap.parse_args(argv)
    try:
        findings = load_findings(args.findings)
        review = load_review(args.labels)
    except InputError as e:
        print(f"review_precision: {e}", file=sys.stderr)
        return 2
    population = len(findings)
    # Match against the whole run (a label claimed by its own line is not handed to another
    # store of the same target), then keep the sample.
    every = join(findings, review.labels)
    used = {id(m.label) for m in every if m.label}
    stale = [lb for lb in review.labels if id(lb) not in used]
    folded = folded_into(findings)
    matches = every
    outside: list[Label] = []
    if review.sample is not None:
        keep = {id(f): n for n, f in enumerate(draw_sample(findings, review.sample))}
        matches = sorted(
            (m for m in every if id(m.finding) in keep), key=lambda m: keep[id(m.finding)]
        )
        in_sample = {id(m.label) for m in matches if m.label}
        outside = [lb for lb in review.labels if id(lb) in used and id(lb) not in in_sample]

    if args.sample_list:
        for m in matches:
            print(describe(m.finding))
        return 0
    if args.skeleton:
        for m in matches:
            if m.label is None:
                print(skeleton(m.finding))
        return 0

    for line in summary_lines(matches, population, review):
        print(line)
    fallback = [m for m in matches if m.label and m.how != "fingerprint"]
    if fallback:
        print(f"\nmatched without the fingerprint ({len(fallback)}), confirm these labels:")
        for m in fallback:
            lb = m.label
            print(f"  {describe(m.finding)} <- {lb.label} ({m.how}: {lb.path}:{lb.line})")
    unl = [m for m in matches if m.label is None]
    if unl:
        print(f"\nunlabelled ({len(unl)}):")
        for m in unl:
            print(f"  {describe(m.finding)} [{m.finding.get('confidence', '')}]")
    if outside:
        print(f"\nlabels whose finding is still reported but outside the sample ({len(outside)}):")
        for lb in outside:
            print(
                f"  {lb.fingerprint or '-'} {lb.rule} {lb.path}:{lb.line} {lb.target} ({lb.label})"
            )
    if stale:
        gone = Counter(lb.cause or lb.label for lb in stale)
        print(
            f"\nlabels that match no current finding ({len(stale)}; by cause: "
            + ", ".join(f"{k} {n}" for k, n in sorted(gone.items(), key=lambda x: -x[1]))
            + "):"
        )
        for lb in stale:
            host = folded.get(lb.fingerprint)
            print(
                f"  {lb.fingerprint or '-'} {lb.rule} {lb.path}:{lb.line} {lb.target} ({lb.label})"
                + (f" folded into {host}" if host else "")
            )
    bad = bad_cites(review.labels, args.sources) if args.sources else []
    if bad:
        print(f"\nbad cites ({len(bad)}):")
        for line in bad:
            print(f"  {line}")
    if args.markdown:
        Path(args.markdown).write_text(
            markdown(matches, population, review, stale, folded), encoding="utf-8"
        )
    return 1 if args.check and (unl or bad) else 0


if __name__ == "__main__":
    sys.exit(main())

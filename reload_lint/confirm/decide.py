"""From a run's stage messages to a verdict for one finding (docs/runner.md, "Verdict").

* red: a linked storage (the finding's target) that the capture read moved or was freed; the
  failure is the replay's (livelock, illegal access, stale read) or else ``freed``/``moved``;
* unread: a linked storage moved or was freed, but the dispatch recorder never saw the capture
  read it (the graph cannot be hurt by it);
* green: every linked storage stayed put and the replay matched a cold load of the new weights
  (census tier: the census alone, no replay);
* inconclusive: anything else, with the missing piece as the reason.

A replay exception is "illegal access" only when it is a CUDA error (or, on CPU, the stand-in
graph's ``IllegalAccess``: an op failing on a freed captured tensor's poisoned bytes). Any other
exception is a harness failure: inconclusive, with the error.
"""

from __future__ import annotations

import ast
import functools
import importlib.util

CUDA_ERROR_MARKERS = (
    "illegal memory access",
    "CUDA error",
    "cudaError",
    "misaligned address",
    "AcceleratorError",
)


def _stage(msgs: list[dict], name: str) -> dict | None:
    for m in msgs:
        if m["stage"] == name and m.get("ok", True):
            return m
    return None


def _failed(msgs: list[dict]) -> dict | None:
    for m in msgs:
        if not m.get("ok", True):
            return m
    return None


def is_cuda_error(err: dict) -> bool:
    text = f"{err.get('error_type', '')} {err.get('error', '')}"
    return any(m in text for m in CUDA_ERROR_MARKERS) or err.get("error_type") == "IllegalAccess"


# -- did the run reach the flagged line? --------------------------------------------------------


def executed_lines(msgs: list[dict]) -> dict[str, list[int]] | None:
    for m in msgs:
        if "executed" in m:
            return m["executed"]
    return None


def reach(finding, msgs: list[dict]) -> tuple[bool, str]:
    """(reached, why not). Unknown (the run failed before loading) counts as reached: the
    failure itself is then the reason."""
    err = _failed(msgs)
    if err is not None and err["stage"] == "cold_b" and _backend_refused(err):
        return False, f"vLLM refuses this backend here: {err['error']}"
    executed = executed_lines(msgs)
    loaded = any(m["stage"] == "cold_b" and m.get("ok", True) for m in msgs)
    if executed is None or not loaded:
        # the run failed before its first load and post-load finished: it cannot tell, and
        # its failure is the answer
        return True, ""
    lines = set(executed.get(finding.path, []))
    span = range(finding.line, max(finding.end_line or finding.line, finding.line) + 1)
    if any(ln in lines for ln in span):
        return True, ""
    if not lines:
        return False, f"{finding.path} did not run at all in this configuration"
    guard = guard_of(finding.path, finding.line)
    return False, f"line {finding.line} did not run" + (f" ({guard})" if guard else "")


def _backend_refused(err: dict) -> bool:
    """vLLM's backend oracle rejected the forced backend for this device/configuration: that
    backend cannot reach the site here (not evidence about the site)."""
    text = err.get("error", "")
    return "backend" in text.lower() and any(
        k in text for k in ("does not support", "is disabled", "not supported", "No ")
    )


@functools.lru_cache(maxsize=256)
def _source(path: str) -> str | None:
    mod = path[:-3].replace("/", ".") if path.endswith(".py") else None
    if not mod:
        return None
    try:
        spec = importlib.util.find_spec(mod)
    except Exception:
        return None
    if spec is None or not spec.origin:
        return None
    try:
        with open(spec.origin, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return None


def guard_of(path: str, line: int) -> str | None:
    """The innermost branch condition that decides whether ``line`` runs, as source text."""
    src = _source(path)
    if src is None:
        return None
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and node.lineno <= line <= (node.end_lineno or line):
            in_body = any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in node.body)
            cond = ast.unparse(node.test)
            text = f"guarded by `if {cond}`" if in_body else f"in the else of `if {cond}`"
            if best is None or node.lineno >= best[0]:
                best = (node.lineno, text)
    return best[1] + ", false for this configuration" if best else None


# -- the verdict --------------------------------------------------------------------------------


def _died(msgs: list[dict], outcome: dict) -> str:
    """Which stage a child died in (the one after the last it reported), and how."""
    from reload_lint.confirm.pipeline import PIPELINE

    names = [n for n, _ in PIPELINE]
    done = [m["stage"] for m in msgs if m["stage"] in names]
    nxt = names.index(done[-1]) + 1 if done else 0
    where = names[nxt] if nxt < len(names) else "after its last stage"
    sig = outcome.get("signal")
    how = f"exit {outcome.get('exitcode')}"
    if sig:
        import signal

        try:
            how = f"{signal.Signals(sig).name}, signal {sig}"
        except ValueError:
            how = f"signal {sig}"
    return f"the child process died in stage {where} ({how}): native code crashed there"


def _masked(finding, census: dict, err: dict, fixed: bool) -> tuple[str, str | None, str]:
    """vLLM's own reload raised because post-load left a plain attribute where a checkpoint
    Parameter was (``err["masked"]``: the ``module.attr`` names). The finding that stores that
    attribute is the masking site: red ``masked`` when the capture read its storage (the update
    fails loudly and the graph keeps serving the old weights), unread when it did not. Any
    other finding of the layer cannot be judged by this run: the runner reruns the build with
    the masking site's fix as a precondition (``fixes.PRECONDITIONS``)."""
    from reload_lint.confirm.targets import parse_target

    names = [m.rsplit(".", 1)[-1] for m in err["masked"]]
    base, attrs = parse_target(finding.target)
    side = "fix does not hold: " if fixed else ""
    why = (
        f"vLLM's layerwise reload raises {err['error']} (restore_layer_on_meta re-registers "
        f"the checkpoint Parameter over the plain attribute post-load left in its place)"
    )
    if base == "layer" and attrs and attrs[0] in names:
        if f"'{attrs[0]}'" not in err["error"]:
            why += (
                f"; `{attrs[0]}` shadows its checkpoint Parameter the same way (the restore "
                "stops at the first)"
            )
        linked_paths = set(census["linked"].get(finding.fingerprint, []))
        linked = [r for r in census["rows"] if r["path"] in linked_paths]
        visible = [r for r in linked if r["graph_visible"]]
        if visible:
            return (
                "red",
                "masked",
                side + f"{why}; the capture read {visible[0]['path']} (graph-visible): no new "
                "weights reach it, the update fails loudly and the graph keeps the old ones",
            )
        if linked:
            return "unread", None, side + f"{why}; the capture never read {linked[0]['path']}"
        return "inconclusive", None, f"{why}; nothing recorded to link {finding.target}"
    return (
        "inconclusive",
        None,
        f"{why}: masked by `layer.{names[0]}`; this site is judged by the run with that "
        "masking site's fix as a precondition",
    )


def _fmt(r: dict) -> str:
    if r["freed"]:
        return f"{r['path']} freed (was {r['old_ptr']})"
    return f"{r['path']} moved {r['old_ptr']} -> {r['new_ptr']}"


def _replay_failure(msgs, outcome, err) -> tuple[str | None, str, str | None]:
    """(failure, detail, harness error) from how the replay ended."""
    replay = _stage(msgs, "replay")
    if outcome["status"] == "hang":
        return "livelock", f"replay did not return within {outcome['after_s']}s; killed", None
    if outcome["status"] == "died" and outcome["stage"] == "replay":
        sig = outcome.get("signal")
        how = f"signal {sig}" if sig else f"exit {outcome['exitcode']}"
        return "illegal access", f"replay killed the process ({how})", None
    if err is not None and err["stage"] == "replay":
        if is_cuda_error(err):
            return "illegal access", f"replay raised {err['error']}", None
        return None, "", f"harness failure at replay: {err['error']}"
    if replay is not None and not replay["match"]:
        return (
            "stale read",
            f"replay disagrees with cold load of B (rel err {replay.get('rel')})",
            None,
        )
    return None, "", None


def still_held(rows: list[dict]) -> list[dict]:
    """A moved path whose old storage is still held, unmoved, by another recorded path (the
    registered parameter a rebuilt object used to alias) did not escape: the graph reads a
    storage that is still the live one. Such rows are marked not moved, with a note."""
    stable = {}
    for r in rows:
        if not r["moved"] and not r["freed"] and r.get("storage") is not None:
            stable.setdefault(r["storage"], r["path"])
    out = []
    for r in rows:
        holder = stable.get(r.get("storage"))
        if r["moved"] and not r["freed"] and holder is not None:
            r = {**r, "moved": False, "still_held_by": holder}
        out.append(r)
    return out


def decide(finding, msgs: list[dict], outcome: dict, fixed: bool) -> tuple[str, str | None, str]:
    """(verdict, failure, reason) for one finding from a run's messages and how it ended."""
    return judge(finding, msgs, outcome, fixed)[:3]


def judge(
    finding, msgs: list[dict], outcome: dict, fixed: bool
) -> tuple[str, str | None, str, str]:
    """(verdict, failure, reason, grade): ``decide`` plus the fine verdict (``GRADES``)."""
    from reload_lint.confirm.evidence import OBSERVED_FAILURES

    verdict, failure, reason = _decide(finding, msgs, outcome, fixed)
    if verdict == "red":
        grade = (
            "masked"
            if failure == "masked"
            else "red-observed"
            if failure in OBSERVED_FAILURES
            else "red-unobserved"
        )
    elif verdict == "green" and _NA in reason:
        grade = "not-applicable"
    else:
        grade = verdict
    return verdict, failure, reason.replace(_NA, ""), grade


#: marks a green reason as "the target holds no tensor of its own here" (stripped from the text)
_NA = "\x00na"


def census_links(finding, census: dict) -> tuple[list[str], dict[str, str]]:
    """The finding's own linked paths and the lent ones (ownership.own_links)."""
    from reload_lint.confirm.ownership import own_links

    return own_links(
        finding.fingerprint, finding.target, getattr(finding, "message", "") or "", census
    )


def _decide(finding, msgs: list[dict], outcome: dict, fixed: bool) -> tuple[str, str | None, str]:
    census = _stage(msgs, "census")
    err = _failed(msgs)
    if census is None:
        if err is not None and err["stage"] == "reload":
            pre = err.get("precondition")
            return (
                "inconclusive",
                None,
                f"vLLM's layerwise reload itself fails on this layer: {err['error']}"
                + (f"; this site is judged by the run with the {pre} precondition" if pre else ""),
            )
        if err is not None:
            return "inconclusive", None, f"stopped at {err['stage']}: {err['error']}"
        if outcome["status"] == "timeout":
            return "inconclusive", None, f"timed out {outcome['stage']}"
        if outcome["status"] == "died":
            return "inconclusive", None, _died(msgs, outcome)
        return "inconclusive", None, "no census was taken"
    if err is not None and err["stage"] == "reload" and err.get("masked"):
        return _masked(finding, census, err, fixed)
    rows = census["rows"]
    own, lent = census_links(finding, census)
    linked_paths = set(own)
    linked = [r for r in rows if r["path"] in linked_paths]
    load_a = _stage(msgs, "load_a") or {}
    census_tier = load_a.get("tier") == "census"
    if not linked and lent:
        # every storage the target reaches is another finding's store (or another line's
        # object): nothing of this finding's own store is in the graph on this build
        first = next(iter(lent.items()))
        return (
            "green",
            None,
            _NA
            + f"{finding.target} holds no storage of its own here: {first[0]}: {first[1]}"
            + (f" (+{len(lent) - 1} more)" if len(lent) > 1 else ""),
        )
    if not linked:
        seen = [r for r in rows if (r["moved"] or r["freed"]) and r["graph_visible"]]
        rfail, rdetail, harness = _replay_failure(msgs, outcome, err)
        replay = _stage(msgs, "replay")
        stored_none = finding.fingerprint in census.get("none_targets", [])
        holds = f"{finding.target} holds no tensor after post-load" + (
            " (it is None on this backend)" if stored_none else ""
        )
        backend = load_a.get("backend") or "unknown"
        if (
            (finding.rule in ("RL105", "RL108") or stored_none)
            and load_a.get("backend")
            and harness is None
        ):
            # the rebuilt object was observed and holds no storage a graph could bake in:
            # whatever else escaped belongs to other targets (their own findings)
            if census_tier:
                how = "census tier"
            elif replay is not None and replay["match"]:
                how = "replay matches cold B"
            else:
                how = f"the replay failure ({rdetail}) is not this target's"
            other = f"; {len(seen)} other graph-visible storage(s) escaped" if seen else ""
            return "green", None, _NA + f"{holds} (vLLM built {backend}); {how}{other}"
        return (
            "inconclusive",
            rfail,
            f"{holds} (backend {backend}): nothing recorded to link"
            + (f"; escaped: {', '.join(r['path'] for r in seen[:6])}" if seen else "")
            + (f"; {rdetail or harness}" if (rdetail or harness) else ""),
        )
    rows = still_held(rows)
    linked = [r for r in rows if r["path"] in linked_paths]
    visible = [r for r in linked if r["graph_visible"]]
    escaped = [r for r in linked if r["freed"] or r["moved"]]
    escaped_visible = [r for r in escaped if r["graph_visible"]]
    others = [
        r
        for r in rows
        if (r["moved"] or r["freed"]) and r["graph_visible"] and r["path"] not in linked_paths
    ]
    if escaped and not escaped_visible:
        side = "fix does not hold, but " if fixed else ""
        return (
            "unread",
            None,
            side
            + "; ".join(_fmt(r) for r in escaped[:4])
            + "; the capture never read it (dispatch recorder), so no graph holds its address",
        )
    if census_tier:
        stand = ", ".join(load_a.get("standins", []))
        if escaped_visible:
            failure = "freed" if any(r["freed"] for r in escaped_visible) else "moved"
            side = "fix does not hold: " if fixed else ""
            return (
                "red",
                failure,
                side
                + "; ".join(_fmt(r) for r in escaped_visible[:4])
                + f" (census tier, stand-ins: {stand})",
            )
        return (
            "green",
            None,
            f"target stable ({len(visible)} graph-visible storage(s)); census tier, no replay "
            f"(stand-ins: {stand})",
        )
    rfail, rdetail, harness = _replay_failure(msgs, outcome, err)
    replay = _stage(msgs, "replay")
    if harness is not None:
        return "inconclusive", None, harness
    if rfail is None and err is not None:
        return "inconclusive", None, f"stopped at {err['stage']}: {err['error']}"
    if rfail is None and replay is None:
        return "inconclusive", None, f"replay did not run ({outcome})"
    if escaped_visible:
        freed = [r for r in escaped_visible if r["freed"]]
        failure = rfail or ("freed" if freed else "moved")
        reason = "; ".join(
            _fmt(r) for r in (freed + [r for r in escaped_visible if not r["freed"]])[:4]
        )
        if rfail:
            reason += f"; {rdetail}"
        elif replay is not None and replay["match"]:
            reason += "; replay still matched cold B (value-identical stale memory)"
        if others:
            reason += f"; {len(others)} other graph-visible storage(s) escaped too"
        return "red", failure, ("fix does not hold: " if fixed else "") + reason
    if not visible and rfail is None and not others:
        return (
            "green",
            None,
            f"target stable ({len(linked)} storage(s), none read by the capture); replay matches "
            "cold B",
        )
    if not visible:
        return (
            "inconclusive",
            rfail,
            f"target {finding.target} found ({len(linked)} storage(s)) but the capture read none "
            f"of them, none moved, and {rdetail or 'other storages escaped'}",
        )
    if rfail is None:
        extra = f" ({len(others)} other graph-visible storages escaped)" if others else ""
        return (
            "green",
            None,
            f"target stable ({len(visible)} storage(s)); replay matches cold B{extra}",
        )
    other_txt = ", ".join(_fmt(r) for r in others[:4])
    if fixed:
        return "red", rfail, f"target stable but {rdetail}; other escaped: {other_txt or 'none'}"
    if others:
        return (
            "inconclusive",
            rfail,
            f"target stable; {rdetail}, attributable to other escaped storages: {other_txt}",
        )
    return "inconclusive", rfail, f"target stable and nothing else escaped, yet {rdetail}"

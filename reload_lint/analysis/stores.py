"""Stores and judging: where a value is stored, which reload contract judges it, the
finding it becomes, and the apply-time reads that make it graph-visible."""

from __future__ import annotations

from reload_lint.analysis import values as V
from reload_lint.analysis.frame import (
    Frame,
    _describe,
    _kept,
)
from reload_lint.analysis.values import AV
from reload_lint.findings import Finding, TraceStep
from reload_lint.rules import RULES


class StoreMixin:
    """Mixed into Analyzer (analysis/interp.py); uses its state and the other rooms' methods."""

    # ------------------------------------------------------------------ registries
    def registered_names(self) -> set[str]:
        if self._registered is None:
            regs: set[str] = set()
            bufs: set[str] = set()
            for rec in self.index.loaded_records():
                regs.update(rec.get("registered", ()))
                bufs.update(rec.get("buffers", ()))
            self._registered, self._buffers = regs, bufs
        return self._registered

    def buffer_names(self) -> set[str]:
        self.registered_names()
        return self._buffers or set()

    # ------------------------------------------------------------------ stores
    def store_item(self, fr: Frame, tgt, vals, st) -> None:
        base_e = tgt[1]
        if base_e[0] == "n" and base_e[1] in fr.env:
            cur = fr.env[base_e[1]]
            fr.env[base_e[1]] = tuple(
                AV(V.CONTAINER, items=V.union(c.items, vals), value=c.value)
                if c.kind == V.CONTAINER
                else c
                for c in cur
            )
            return
        if base_e[0] == "a":
            held = self.eval(fr, base_e)
            if any(h.kind in V.TENSORISH for h in held):
                return  # `t[i] = v` writes into t's storage: in place
            owner = self.eval(fr, base_e[1])
            if any(o.kind in (V.MODULE, V.OBJ, V.MATTR) for o in owner):
                cont = (AV(V.CONTAINER, items=vals, value="dict"),)
                self.store_attr(
                    fr, base_e[1], base_e[2], cont, st, self.render(tgt), recv=owner, mutate=True
                )

    def store_attr(
        self, fr: Frame, base_e, attr: str, vals: tuple, st, target: str, recv=None, mutate=False
    ) -> None:
        if recv is None:
            recv = self.eval(fr, base_e)
        if not mutate:
            fr.heap[target] = vals
        contract = self.contract_for(fr.path)
        for r in recv:
            if r.kind in (V.OBJ, V.MODULE) and r.cls:
                for v in vals:
                    if v.kind in (V.OBJ, V.MODULE) and v.cls:
                        self.note_held(r.cls, attr, v.cls)  # for the reader search
            if r.kind in (V.OBJ, V.MODULE) and fr.constructing and r.oid == fr.constructing:
                for v in vals:
                    kept = _kept(v)
                    if kept is not None:
                        cname = r.cls.split(":", 1)[1]
                        note = f"{cname} keeps {_describe(kept)} on self.{attr}"
                        tr = kept.trace
                        if tr and tr[-1].line == st[1] and tr[-1].path == fr.path:
                            tr = tr[:-1] + (TraceStep(fr.path, st[1], f"{tr[-1].note}; {note}"),)
                        else:
                            tr = tr + (TraceStep(fr.path, st[1], note),)
                        self.allocs[fr.constructing].append(
                            AV(
                                kept.kind,
                                conf=kept.conf,
                                trace=tr,
                                src=kept.src,
                                backends=kept.backends,
                                chosen=kept.chosen,
                            )
                        )
                continue
            if fr.mode == "post":
                owner = {V.MODULE: "module", V.OBJ: "object", V.MATTR: "held"}.get(r.kind)
                if attr == "data" and r.kind in (V.REG, V.VIEW, V.MATTR, V.PARAM, V.FRESH):
                    owner = "data" if r.kind != V.FRESH else None
                if owner is None:
                    continue
                for v in vals:
                    verdict = contract.judge_store(owner, attr, v, self.buffer_names(), st, fr)
                    if verdict:
                        rule, why = verdict
                        conf = v.conf if owner != "held" else V.lower(v.conf)
                        key = self.report(fr, rule, st, target, v, why, conf=conf)
                        if key and owner == "data" and r.src:
                            # `param.data = ...` with `param = getattr(layer, name)`: the
                            # graph reads the attribute param came from, not `param`
                            self._read_attr.setdefault(key, r.src.rsplit(".", 1)[-1])
                        src_attr = v.src.rsplit(".", 1)[-1] if v.src else ""
                        if key and v.kind == V.FRESH and src_attr:
                            fr.root.derived_findings.append((key, src_attr))
                        break
            elif fr.mode in ("lazy", "apply") and st[0] == "assign" and st[6]:
                if r.kind not in (V.OBJ, V.MODULE):
                    continue
                for v in vals:
                    if fr.mode == "lazy" and _kept(v) is not None and v.kind != V.REG:
                        self.report(fr, "RL108", st, target, v, "allocated lazily on first forward")
                        break
                    if fr.mode == "apply" and v.kind == V.FRESH and v.src:
                        self.report(fr, "RL201", st, target, v, f"derived from `{v.src}`")
                        break

    # ------------------------------------------------------------------ findings
    def report(self, fr: Frame, rule: str, st, target: str, v: AV, why: str, conf=None) -> tuple:
        key = (fr.path, st[1], rule, target)
        if key in self.findings:
            return key
        root = fr.chain[0]
        self._root_of[key] = (root.path, root.note.rsplit(" ", 1)[-1])
        self.note_store_site(key, fr, st)
        contract = self.contract_for(fr.path)
        trace = list(v.trace)
        if v.kind == V.CALLABLE:
            for _name, cap in v.items:
                for c in cap:
                    trace.extend(c.trace)
        elif v.kind == V.CONTAINER:
            for c in v.items:
                trace.extend(c.trace)
        trace.append(TraceStep(fr.path, st[1], f"stored on `{target}` ({why})"))
        for step in reversed(fr.chain[1:]):
            trace.append(
                TraceStep(step.path, step.line, f"reached from {step.note.replace('calls ', '')}")
            )
        trace.append(fr.chain[0])
        dedup: list[TraceStep] = []
        seen_lines: set[tuple[str, int]] = set()
        for s in trace:
            if (s.path, s.line) not in seen_lines:
                seen_lines.add((s.path, s.line))
                dedup.append(s)
        rule_meta = RULES[rule]
        self.findings[key] = Finding(
            rule=rule,
            path=fr.path,
            line=st[1],
            column=st[2] if len(st) > 2 else 1,
            end_line=st[3] if len(st) > 3 else st[1],
            symbol=fr.func["qn"],
            target=target,
            message=contract.message(rule, target, v, why),
            severity=rule_meta.severity,
            confidence=conf or v.conf,
            trace=dedup[:160],
            contract=contract.name,
            fix=contract.fix(rule, target, v, why),
            backends=list(v.backends),
        )
        return key

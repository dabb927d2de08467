"""`worklist --include-decided`: the sites the engine decided safe, and every row of the RFC's
storage-identity tables with a status.

The RFC (rfc-weight-reload-correctness, category 1 "Confirmed" and "High-risk candidates",
plus category 2's FlashInfer sinks) names components and tensors, not lines. Each row below
is matched against a run by file name and attribute name; a row's status is *reported* (the
findings, by fingerprint), *decided safe* (what the engine decided for each of its stores, and
why), or *not in this tree* (no store of those tensors in those files was reached). A row that
the engine now decides is safe therefore stays on the page, with its reason, instead of
disappearing from the table.

The decisions come from an explaining run of the analysis over every line
(analysis/explainlog.py): findings it made and a later pass removed (with the reason the pass
recorded), and stores of new storage it judged no escape (zero-element, allocates nothing, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatch

from reload_lint.analysis.explainlog import fact_of


@dataclass(frozen=True)
class RfcRow:
    ref: str  # tracking reference or the table it is from
    component: str
    tensors: tuple[str, ...]  # attribute names, as stored (`layer.<name>` / `self.<name>`)
    files: tuple[str, ...]  # file-name globs


RFC_ROWS = (
    RfcRow("#48251", "Generic MLA", ("W_UV", "W_UK_T"), ("mla_attention.py",)),
    RfcRow(
        "#40390 / #46009",
        "ROCm unquantized MoE shuffle and padding",
        ("w13_weight", "w2_weight"),
        ("unquantized_fused_moe_method.py", "rocm_aiter_fused_moe.py"),
    ),
    RfcRow(
        "#41670",
        "CUTLASS grouped-GEMM FP8 MoE strides",
        ("ab_strides1", "ab_strides2", "c_strides1", "c_strides2", "moe_kernel"),
        ("cutlass_moe.py", "fp8.py"),
    ),
    RfcRow(
        "#48438",
        "Marlin linear workspace + act-order sort indices",
        ("workspace", "g_idx_sort_indices"),
        ("marlin.py",),
    ),
    RfcRow(
        "#48438 siblings",
        "Marlin fallbacks (FP8/NVFP4/MXFP8/MXFP4 dense and MoE), CT WNA16 MoE",
        ("workspace",),
        ("marlin_utils_fp*.py", "marlin_utils_mx*.py", "*wna16_marlin*.py", "*marlin_moe*.py"),
    ),
    RfcRow("#48539", "Machete act-order permutation", ("act_perm",), ("machete.py",)),
    RfcRow(
        "live H100",
        "FlashInfer CUTLASS MoE SwiGLU constants",
        ("gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit"),
        ("flashinfer_cutlass_moe.py",),
    ),
    RfcRow(
        "high-risk",
        "AITER MLA FP4/FP8 derived weights",
        ("W_K", "W_K_scale", "W_V", "W_V_scale"),
        ("mla_attention.py",),
    ),
    RfcRow(
        "high-risk",
        "FlashInfer B12x MoE runtime scales",
        ("_fc2_input_scale", "w1_sf_mma", "w2_sf_mma"),
        ("flashinfer_b12x_moe.py",),
    ),
    RfcRow(
        "high-risk",
        "Compressed-tensors NVFP4 CUTLASS MoE derived scales",
        ("moe_quant_config", "moe_kernel", "a1_gscale", "a2_gscale", "g1_alphas", "g2_alphas"),
        ("compressed_tensors_moe_w4a4_nvfp4.py",),
    ),
    RfcRow(
        "high-risk",
        "CUTLASS W4A8 FP8 MoE stride state",
        (
            "b_strides1",
            "b_strides2",
            "a_strides1",
            "a_strides2",
            "c_strides1",
            "c_strides2",
            "s_strides1",
            "s_strides2",
            "moe_kernel",
        ),
        ("compressed_tensors_moe_w4a8_fp8.py", "cutlass_moe.py"),
    ),
    RfcRow(
        "high-risk",
        "RDNA3 WNA16 MoE decode scratch",
        ("rdna3_w1_buf", "rdna3_act_buf", "rdna3_empty_tw"),
        ("*rdna3*.py",),
    ),
    RfcRow(
        "high-risk",
        "Compressed-tensors WNA8O8 scale copies",
        ("_input_scale", "_output_scale", "input_scale", "output_scale"),
        ("compressed_tensors_wNa8o8.py",),
    ),
    RfcRow(
        "high-risk",
        "TRT-LLM FP8/MXFP4/NVFP4 MoE constants",
        ("gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit", "g1_scale_c"),
        ("trtllm_*moe.py",),
    ),
    RfcRow(
        "high-risk",
        "ModelOpt/other NVFP4 reciprocal-scale chains",
        ("moe_quant_config", "moe_kernel", "a1_gscale", "a2_gscale"),
        ("modelopt.py", "quark_moe.py"),
    ),
    RfcRow("#48251 (category 2)", "FlashInfer attention sinks", ("sinks",), ("flashinfer.py",)),
)


def attr_of(target: str) -> str:
    """`layer.w13_weight.data` -> `w13_weight`; `self.moe_kernel` -> `moe_kernel`."""
    parts = target.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _in_row(row: RfcRow, path: str, target: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return attr_of(target) in row.tensors and any(fnmatch(name, g) for g in row.files)


def decided_sites(explain: dict, findings=()) -> list[dict]:
    """Sites the engine decided safe: findings a later pass removed (with the pass's reason),
    and new storage judged no escape. One entry per (path, line, target); a store that is
    reported (`findings`: for another value it may hold) is not listed."""
    out: dict[tuple, dict] = {(f.path, f.line, f.target): None for f in findings}
    for key, (made, _origin) in (explain.get("created") or {}).items():
        why = (explain.get("dropped") or {}).get(key)
        if why is None:
            continue  # still reported, or merged under another name
        out.setdefault(
            (key[0], key[1], made.target),
            {
                "path": key[0],
                "line": key[1],
                "target": made.target,
                "symbol": made.symbol,
                "rule": made.rule,
                "fact": fact_of(why),
                "why": why,
            },
        )
    for row in explain.get("judged") or ():
        if row["rule"] or not row["safe"]:
            continue
        fact, why = row["safe"]
        if fact not in ("zero-element", "allocates-nothing", "idempotent", "same-shape"):
            continue
        out.setdefault(
            (row["path"], row["line"], row["target"]),
            {
                "path": row["path"],
                "line": row["line"],
                "target": row["target"],
                "symbol": row["function"],
                "rule": None,
                "fact": fact,
                "why": why,
            },
        )
    kept = [d for d in out.values() if d is not None]
    return sorted(kept, key=lambda d: (d["path"], d["line"], d["target"]))


def rfc_status(findings, decided: list[dict], files=None) -> list[dict]:
    """Each RFC row's status. `files` (the tree's paths) tells "no store reached" (the files
    are there: fixed or renamed upstream) from "not in this tree" (no such file)."""
    names = {p.rsplit("/", 1)[-1] for p in files} if files is not None else None
    rows = []
    for row in RFC_ROWS:
        hits = [f for f in findings if _in_row(row, f.path, f.target)]
        # a row's store folded into another finding (one storage, one finding: its `also`)
        folded = [
            (f, a)
            for f in findings
            for a in getattr(f, "also", None) or ()
            if _in_row(row, a.get("path", ""), a.get("target", ""))
        ]
        # a row's tensors kept inside an object a finding rebuilds: a step of its trace
        traced = [
            f
            for f in findings
            if f not in hits
            and all(f is not h for h, _a in folded)
            and any(
                any(fnmatch(st.path.rsplit("/", 1)[-1], g) for g in row.files)
                and any(re.search(rf"\.{re.escape(t)}\b", st.note) for t in row.tensors)
                for st in getattr(f, "trace", ())
            )
        ]
        safe = [d for d in decided if _in_row(row, d["path"], d["target"])]
        reported_targets = {(f.path, attr_of(f.target)) for f in hits}
        reported_targets |= {(a.get("path"), attr_of(a.get("target", ""))) for _f, a in folded}
        safe = [d for d in safe if (d["path"], attr_of(d["target"])) not in reported_targets]
        if hits or folded:
            status = "reported" + (" (some stores decided safe)" if safe else "")
        elif traced:
            status = "reported in traces"
        elif safe:
            status = "decided safe"
        elif names is not None and any(fnmatch(n, g) for n in names for g in row.files):
            status = "no store reached"
        else:
            status = "not in this tree"
        rows.append(
            {
                "row": row,
                "status": status,
                "findings": hits,
                "folded": folded,
                "traced": traced,
                "decided": safe,
            }
        )
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_decided(findings, explain: dict, files=None) -> str:
    decided = decided_sites(explain, findings)
    lines = [
        "",
        "## RFC storage-identity rows",
        "",
        "Every row of the RFC's storage-identity tables (category 1, confirmed and high-risk, "
        "and category 2's FlashInfer sinks), matched by file and tensor name: **reported** "
        "(findings above, or folded into one of them: the same storage), **reported in traces** (the tensors are kept by an object a finding "
        "rebuilds: a step of that finding's trace), **decided safe** (the engine's reason for each store), **no store "
        "reached** (the files are here but no post-load path stores those tensors: fixed or "
        "renamed upstream; `reload-lint explain PATH:LINE` says why for a line), or **not in "
        "this tree** (no such file).",
        "",
        "| RFC | Component | Tensors | Status | Sites |",
        "|---|---|---|---|---|",
    ]
    for r in rfc_status(findings, decided, files):
        row = r["row"]
        sites = [f"`{f.path}:{f.line}` {f.rule} `{f.target}`" for f in r["findings"]]
        sites += [
            f"`{a.get('path')}:{a.get('line')}` {a.get('rule')} `{a.get('target')}`, folded into "
            f"`{f.path}:{f.line}` {f.rule} `{f.target}`"
            for f, a in r["folded"]
        ]
        sites += [f"in the trace of `{f.path}:{f.line}` {f.rule} `{f.target}`" for f in r["traced"]]
        sites += [
            f"`{d['path']}:{d['line']}` `{d['target']}`: {d['fact']}, {d['why']}"
            for d in r["decided"]
        ]
        lines.append(
            f"| {_cell(row.ref)} | {_cell(row.component)} | "
            f"{', '.join(f'`{t}`' for t in row.tensors)} | {r['status']} | "
            f"{_cell('; '.join(sites)) or '-'} |"
        )
    lines += [
        "",
        f"## Decided safe by the engine ({len(decided)} sites)",
        "",
        "Stores that create or bind storage after loading but that the engine decided are no "
        "graph hazard, with the fact that decided each; `reload-lint explain PATH:LINE` gives "
        "the same answer for one line.",
        "",
        "| Site | Tensor | Would be | Fact | Why |",
        "|---|---|---|---|---|",
    ]
    for d in decided:
        lines.append(
            f"| `{d['path']}:{d['line']}` | `{_cell(d['target'])}` | {d['rule'] or '-'} | "
            f"{d['fact']} | {_cell(d['why'])} |"
        )
    return "\n".join(lines) + "\n"

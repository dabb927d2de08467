"""The unshadow precondition at a masking site frees the site's own storage before the
post-load runs: neither a bug-side nor a fixed-side red made under it is evidence
(verdicts._precondition_artifacts)."""

from reload_lint.confirm.verdicts import _precondition_artifacts

UNSHADOW = ["unshadow: before vLLM's restore_layer_on_meta, a plain attribute ... is taken off"]


def _row(fixed, verdict, grade, preconditions=(), failure=None, fp="f1", recipe="r"):
    return {
        "fingerprint": fp,
        "recipe": recipe,
        "fixed": fixed,
        "verdict": verdict,
        "grade": grade,
        "failure": failure,
        "reason": "fix does not hold: layer.w freed" if fixed else "layer.w freed",
        "preconditions": list(preconditions),
    }


def _rows(fp_masked="f1"):
    return [
        _row(False, "red", "masked", failure="masked", fp=fp_masked),
        _row(False, "red", "red-observed", UNSHADOW, failure="stale read"),
        _row(True, "red", "red-observed", UNSHADOW, failure="stale read"),
        _row(True, "green", "green", UNSHADOW),
    ]


def test_a_fixed_side_red_under_unshadow_at_a_masking_site_is_inconclusive():
    rows = _rows()
    _precondition_artifacts(rows)
    bug, fixed_red, fixed_green = rows[1], rows[2], rows[3]
    assert bug["grade"] == fixed_red["grade"] == "inconclusive"
    assert "says nothing about the fix" in fixed_red["reason"]
    assert "says nothing about the site" in bug["reason"]
    assert fixed_red["regraded_from"]["verdict"] == "red"
    # a fixed side that held even so keeps its green
    assert fixed_green["grade"] == "green" and "regraded_from" not in fixed_green


def test_without_a_masked_stock_run_the_precondition_records_stand():
    rows = _rows(fp_masked="other")
    _precondition_artifacts(rows)
    assert [r["grade"] for r in rows[1:]] == ["red-observed", "red-observed", "green"]

"""The run-time storage watch (reload_lint/watch, docs/watch.md)."""

from __future__ import annotations

import functools
import gc
import inspect
import json
import logging
import os
import sys
import types

import pytest

torch = pytest.importorskip("torch")

from reload_lint.watch import (  # noqa: E402
    StorageMovedError,
    StorageWatch,
    graph_kwargs,
    graph_liveness_oracle,
    vllm_plugin,
)


class Kernel:
    def __init__(self, n=8):
        self.workspace = torch.zeros(n)


class QuantMethod:
    def __init__(self):
        self.kernel = Kernel()


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4, 4))
        self.register_buffer("scale", torch.ones(4))
        self.quant_method = QuantMethod()


def model():
    m = torch.nn.ModuleList([Layer(), Layer()])
    m[0].packed = torch.zeros(3)  # a plain tensor attribute post-load code set
    return m


def test_plain_attribute_rebound_after_load_is_reported_with_its_path():
    m = model()
    watch = StorageWatch.collect(m)
    m[0].packed = m[0].packed.clone()
    report = watch.check()
    assert [c.path for c in report.moved] == ["0.packed"]
    assert "0.packed" in str(report)
    assert report.moved[0].where.endswith(f"test_watch.py:{inspect.getsourcelines(Layer)[1]}")


def test_buffer_and_parameter_copied_in_place_are_not_reported():
    m = model()
    watch = StorageWatch.collect(m)
    with torch.no_grad():
        m[1].scale.copy_(torch.randn(4))
        m[1].weight.copy_(torch.randn(4, 4))
    report = watch.check()
    assert not report and str(report) == ""
    assert report.moved == [] and report.freed == []


def test_kernel_workspace_rebuilt_is_moved_and_its_old_storage_freed():
    m = model()
    watch = StorageWatch.collect(m)
    m[1].quant_method.kernel.workspace = torch.zeros(8)
    report = watch.check()
    path = "1.quant_method.kernel.workspace"
    assert [c.path for c in report.moved] == [path]
    assert [c.path for c in report.freed] == [path]
    assert report.moved[0].where.endswith(f"test_watch.py:{inspect.getsourcelines(Kernel)[1]}")


def test_old_storage_still_held_elsewhere_is_moved_but_not_freed():
    m = model()
    watch = StorageWatch.collect(m)
    keep = m[1].quant_method.kernel.workspace
    m[1].quant_method.kernel.workspace = torch.zeros(8)
    report = watch.check()
    assert [c.path for c in report.moved] == ["1.quant_method.kernel.workspace"]
    assert report.freed == []
    del keep


def test_raise_mode_raises_with_the_report():
    m = model()
    watch = StorageWatch.collect(m, mode="raise")
    m[0].packed = torch.zeros(3)
    with pytest.raises(StorageMovedError) as err:
        watch.check()
    assert isinstance(err.value, RuntimeError)
    assert err.value.report.moved[0].path == "0.packed"


def test_warn_mode_logs_once_per_path(caplog):
    m = model()
    watch = StorageWatch.collect(m)
    m[0].packed = torch.zeros(3)
    with caplog.at_level(logging.WARNING, logger="reload_lint.watch"):
        watch.check()
        watch.check()
    moved = [r for r in caplog.records if "moved 0.packed" in r.getMessage()]
    assert len(moved) == 1


def test_no_change_reports_nothing():
    m = model()
    watch = StorageWatch.collect(m, mode="raise")
    assert not watch.check()


def test_watch_does_not_keep_a_storage_alive():
    m = model()
    watch = StorageWatch.collect(m)
    t = m[0].packed
    ref = torch.multiprocessing.reductions.StorageWeakRef(t.untyped_storage())
    del t
    del m[0].packed
    gc.collect()
    assert ref.expired()
    assert [c.path for c in watch.check().freed] == ["0.packed"]


def test_watch_does_not_keep_the_model_alive():
    m = model()
    watch = StorageWatch.collect(m)
    ref = torch.multiprocessing.reductions.StorageWeakRef(m[0].packed.untyped_storage())
    del m
    gc.collect()
    assert ref.expired() and watch.model is None
    assert "0.packed" in {c.path for c in watch.check().freed}


def test_partial_closure_dict_and_list_paths():
    m = model()
    perm, cl = torch.arange(4), torch.ones(2)

    def make():
        held = cl

        def f():
            return held

        return f

    m[0].apply = functools.partial(torch.add, perm, alpha=1, other=torch.ones(4))
    m[0].fn = make()
    m[0].scales = {"w": torch.ones(1)}
    m[0].parts = [torch.ones(1), (torch.ones(1),)]
    watch = StorageWatch.collect(m)
    assert {
        "0.apply.args[0]",
        "0.apply.kw[other]",
        "0.fn.<closure:held>",
        "0.scales[w]",
        "0.parts[0]",
        "0.parts[1][0]",
    } <= set(watch.slots)
    m[0].scales["w"] = torch.ones(1)
    m[0].parts[1] = (torch.ones(1),)
    m[0].apply = functools.partial(torch.add, perm.clone(), alpha=1, other=torch.ones(4))
    moved = {c.path for c in watch.check().moved}
    assert moved == {"0.scales[w]", "0.parts[1][0]", "0.apply.args[0]", "0.apply.kw[other]"}


def test_ignore_by_path_glob_and_by_finding_fingerprint(tmp_path):
    fp = "0123456789abcdef0123"
    findings = tmp_path / "findings.json"
    findings.write_text(
        json.dumps(
            {
                "findings": [
                    {
                        "rule": "rebind",
                        "symbol": "Kernel.__init__",
                        "target": "self.workspace",
                        "fingerprint": fp,
                        "fix": "copy into the old workspace",
                    }
                ]
            }
        )
    )
    m = model()
    watch = StorageWatch.collect(m, findings=findings)
    m[1].quant_method.kernel.workspace = torch.zeros(8)
    m[0].packed = torch.zeros(3)
    rep = watch.check()
    ws = [c for c in rep.moved if c.path.endswith("workspace")][0]
    assert ws.fingerprint == fp and ws.fix == "copy into the old workspace"
    assert "finding 0123456789abcdef0123" in str(rep)

    m = model()
    watch = StorageWatch.collect(m, ignore=[fp, "0.pack*"], findings=findings)
    m[1].quant_method.kernel.workspace = torch.zeros(8)
    m[0].packed = torch.zeros(3)
    assert not watch.check()


def test_dispatch_recorder_sees_storages_no_path_reaches():
    m = model()
    hidden = {"t": torch.ones(3)}
    watch = StorageWatch.collect(m)
    with watch.record():
        _ = hidden["t"] + 1
    del hidden["t"]
    gc.collect()
    assert any(c.path.startswith("<dispatch:") for c in watch.check().freed)


def test_liveness_oracle_is_detected():
    import inspect as _inspect

    says = graph_liveness_oracle()
    has = "check_input_liveness" in _inspect.signature(torch.cuda.graph).parameters
    assert ("available" in says) == has
    assert graph_kwargs() == ({"check_input_liveness": True} if has else {})


def test_plugin_register_is_a_no_op_without_the_env_var(monkeypatch):
    monkeypatch.delenv("RELOAD_LINT_WATCH", raising=False)
    assert vllm_plugin.register(classes={"json": {"JSONDecoder": (("decode",), ())}}) == []
    assert not hasattr(json.JSONDecoder.decode, "__reload_lint_watch__")


def _fake_vllm(monkeypatch):
    runner_mod = types.ModuleType("fake_vllm_runner")
    worker_mod = types.ModuleType("fake_vllm_worker")
    layerwise = types.ModuleType("fake_vllm_layerwise")

    class GPUModelRunner:
        def __init__(self):
            self.model = model()

        def get_model(self):
            return self.model

        def capture_model(self):
            return 1

        def reload_weights(self):
            self.model[0].packed = torch.zeros(3)  # post-load code rebinds

    class Worker:
        def __init__(self):
            self.model_runner = GPUModelRunner()

        def reload_weights(self):
            self.model_runner.reload_weights()

        def update_weights(self, info):
            pass

    def finalize_layerwise_reload(model, config=None):
        model[1].quant_method.kernel.workspace = torch.zeros(8)

    runner_mod.GPUModelRunner = GPUModelRunner
    worker_mod.Worker = Worker
    layerwise.finalize_layerwise_reload = finalize_layerwise_reload
    for mod in (runner_mod, worker_mod, layerwise):
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
    classes = {
        "fake_vllm_runner": {"GPUModelRunner": (("capture_model", "absent"), ("reload_weights",))},
        "fake_vllm_worker": {"Worker": ((), ("reload_weights", "update_weights", "gone"))},
        "no_such_vllm_module": {"X": (("capture_model",), ())},
    }
    functions = {"fake_vllm_layerwise": ("finalize_layerwise_reload", "missing")}
    return Worker, layerwise, classes, functions


def test_plugin_wraps_fake_worker_and_raises_after_reload(monkeypatch):
    Worker, layerwise, classes, functions = _fake_vllm(monkeypatch)
    monkeypatch.setenv("RELOAD_LINT_WATCH", "raise")
    done = vllm_plugin.register(classes=classes, functions=functions)
    assert done == [
        "fake_vllm_runner:GPUModelRunner.capture_model",
        "fake_vllm_runner:GPUModelRunner.reload_weights",
        "fake_vllm_worker:Worker.reload_weights",
        "fake_vllm_worker:Worker.update_weights",
        "fake_vllm_layerwise:finalize_layerwise_reload",
    ]
    assert vllm_plugin.register(classes=classes, functions=functions) == []  # idempotent
    w = Worker()
    w.update_weights({})  # no manifest before capture: nothing to check
    assert w.model_runner.capture_model() == 1
    w.update_weights({})
    with pytest.raises(StorageMovedError) as err:
        w.reload_weights()
    assert err.value.report.moved[0].path == "0.packed"

    w2 = Worker()
    w2.model_runner.capture_model()
    with pytest.raises(StorageMovedError) as err:
        layerwise.finalize_layerwise_reload(w2.model_runner.model)
    assert err.value.report.moved[0].path == "1.quant_method.kernel.workspace"


def test_plugin_warn_mode_logs(monkeypatch, caplog):
    Worker, _, classes, functions = _fake_vllm(monkeypatch)
    monkeypatch.setenv("RELOAD_LINT_WATCH", "warn")
    vllm_plugin.register(classes=classes, functions=functions)
    w = Worker()
    w.model_runner.capture_model()
    with caplog.at_level(logging.WARNING, logger="reload_lint.watch"):
        w.reload_weights()
    assert any("moved 0.packed" in r.getMessage() for r in caplog.records)


def test_entry_point_is_declared():
    import pathlib

    tomllib = pytest.importorskip("tomllib")

    root = pathlib.Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text())
    eps = data["project"]["entry-points"]["vllm.general_plugins"]
    assert eps == {"reload_lint_watch": "reload_lint.watch.vllm_plugin:register"}


def test_bench_script_runs_on_a_small_stub():
    import pathlib
    import subprocess

    root = pathlib.Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, str(root / "scripts/bench_watch.py"), "--layers", "2", "--repeat", "1"],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    data = json.loads(out.stdout)
    assert data["layers"] == 2 and data["storages"] > 0 and data["check_ms"] >= 0

"""vLLM general plugin: ``RELOAD_LINT_WATCH=warn|raise`` turns the storage watch on in every
worker (entry point ``vllm.general_plugins`` -> ``reload_lint_watch``).

Unset, ``register()`` does nothing. Set, it wraps by name whatever of these the installed vLLM
has (a missing module, class or method is skipped, so one table serves 0.25.1 and 0.33.0):

* after the model runner's ``capture_model``: ``StorageWatch.collect`` on its model;
* after every weight update the worker performs (``reload_weights``, ``update_weights``,
  ``finish_weight_update``, and the layerwise reload's ``finalize_layerwise_reload``):
  ``watch.check()``, which logs (``warn``) or raises ``StorageMovedError`` (``raise``).
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import weakref

log = logging.getLogger("reload_lint.watch")

ENV = "RELOAD_LINT_WATCH"
ATTR = "_reload_lint_watch"
_MARK = "__reload_lint_watch__"

#: module -> class -> (methods after which the manifest is taken, methods after which it is
#: checked); the GPU model runner (v1 and the 0.33 ``gpu/`` runner) and the GPU worker
CLASSES: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "vllm.v1.worker.gpu_model_runner": {
        "GPUModelRunner": (("capture_model",), ("reload_weights",))
    },
    "vllm.v1.worker.gpu.model_runner": {
        "GPUModelRunner": (("capture_model",), ("reload_weights",))
    },
    "vllm.v1.worker.gpu_worker": {
        "Worker": ((), ("reload_weights", "update_weights", "finish_weight_update"))
    },
}
#: module -> functions (taking the model first) after which every live watch is checked; the
#: weight-transfer engines import ``finalize_layerwise_reload`` from these at call time
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "vllm.model_executor.model_loader.reload.layerwise": ("finalize_layerwise_reload",),
    "vllm.model_executor.model_loader.reload": ("finalize_layerwise_reload",),
    "vllm.v1.worker.gpu_model_runner": ("finalize_layerwise_reload",),  # 0.25.1 imports it
    "vllm.model_executor.model_loader.reload.inplace": ("finalize_layerwise_reload",),  # 0.33.0
}

_WATCHES: weakref.WeakSet = weakref.WeakSet()


def mode() -> str | None:
    value = os.environ.get(ENV, "").strip().lower()
    if not value or value in ("0", "off", "false", "no"):
        return None
    if value not in ("warn", "raise"):
        log.warning("%s=%r: expected warn or raise; watching in warn mode", ENV, value)
        return "warn"
    return value


def _model_of(obj):
    get = getattr(obj, "get_model", None)
    if callable(get):
        try:
            return get()
        except Exception:  # the runner has no model yet
            pass
    return getattr(obj, "model", None)


def _watch_of(obj):
    w = getattr(obj, ATTR, None)
    if w is None:
        w = getattr(getattr(obj, "model_runner", None), ATTR, None)
    return w


def _collect(obj, how: str) -> None:
    from reload_lint.watch import StorageWatch

    model = _model_of(obj)
    if model is None:
        log.warning("reload-lint watch: %s has no model to watch", type(obj).__name__)
        return
    watch = StorageWatch.collect(model, mode=how, ignore=_ignore_env())
    setattr(obj, ATTR, watch)
    _WATCHES.add(watch)
    log.info("reload-lint watch: %d storages recorded after capture", len(watch.slots))


def _ignore_env() -> list[str]:
    raw = os.environ.get("RELOAD_LINT_WATCH_IGNORE", "")
    return [p for p in raw.replace(",", " ").split() if p]


def _after_capture(fn, how):
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        out = fn(self, *args, **kwargs)
        try:
            _collect(self, how)
        except Exception:  # the watch must never break the engine's start
            log.exception("reload-lint watch: collect failed")
        return out

    setattr(wrapper, _MARK, True)
    return wrapper


def _after_update(fn):
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        out = fn(self, *args, **kwargs)
        watch = _watch_of(self)
        if watch is not None:
            watch.check()
        return out

    setattr(wrapper, _MARK, True)
    return wrapper


def _after_function(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        model = args[0] if args else kwargs.get("model")
        watches = [w for w in list(_WATCHES) if w.model is model] or list(_WATCHES)
        for w in watches:
            w.check()
        return out

    setattr(wrapper, _MARK, True)
    return wrapper


def _patch(owner, name: str, make) -> bool:
    fn = getattr(owner, name, None)
    if fn is None or not callable(fn) or getattr(fn, _MARK, False):
        return False
    setattr(owner, name, make(fn))
    return True


def register(classes=None, functions=None) -> list[str]:
    """The plugin's entry point; returns what it wrapped (``module:Class.method``)."""
    how = mode()
    if how is None:
        return []
    done: list[str] = []
    for modname, table in (CLASSES if classes is None else classes).items():
        try:
            mod = importlib.import_module(modname)
        except Exception:  # an absent or broken vLLM module is skipped
            continue
        for clsname, (captures, updates) in table.items():
            cls = getattr(mod, clsname, None)
            if cls is None:
                continue
            for name in captures:
                if _patch(cls, name, lambda f: _after_capture(f, how)):
                    done.append(f"{modname}:{clsname}.{name}")
            for name in updates:
                if _patch(cls, name, _after_update):
                    done.append(f"{modname}:{clsname}.{name}")
    for modname, names in (FUNCTIONS if functions is None else functions).items():
        try:
            mod = importlib.import_module(modname)
        except Exception:
            continue
        for name in names:
            if _patch(mod, name, _after_function):
                done.append(f"{modname}:{name}")
    log.info("reload-lint watch (%s): wrapped %s", how, ", ".join(done) or "nothing")
    return done

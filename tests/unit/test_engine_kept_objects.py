"""Objects kept across reloads (issue 27, analysis/kept.py): an object post-load builds again
on every reload but stores only behind a first-use test of the slot it fills (the shape the
`keep_object` codemod writes, or the same idiom by hand) is dropped on a reload; the object the
first load stored stays, so what its first forward allocates lazily is allocated once (no
RL108). A look-alike that keeps the new object on some path, or on every reload, stays
reported; so does a subclass built elsewhere and stored on every reload."""

from __future__ import annotations

from _engine_util import check_files

EXPERTS = """
import torch


class Experts:
    def __init__(self, n):
        self.n = n
        self._scratch = None

    def scratch(self):
        if self._scratch is None:
            self._scratch = torch.empty(16)
        return self._scratch

    def run(self, x):
        return x + self.scratch()


class Kernel:
    def __init__(self, experts):
        self.experts = experts

    def run(self, x):
        return self.experts.run(x)
"""

KEPT = """
from pkg.experts import Experts, Kernel


def _copy_into_kept(kept, new):
    pass


class MoEMethod:
    def process_weights_after_loading(self, layer):
        kernel = Kernel(Experts(4))
        if getattr(self, "kernel", None) is not None:
            _copy_into_kept(self.kernel, kernel)
        if getattr(self, "kernel", None) is None:
            self.kernel = kernel

    def apply(self, layer, x):
        return self.kernel.run(x)
"""

BY_HAND = """
from pkg.experts import Experts


class MoEMethod:
    def process_weights_after_loading(self, layer):
        if self.experts is None:
            self.experts = Experts(4)

    def apply(self, layer, x):
        return self.experts.run(x)
"""

# look-alike: the test is of another slot, so the new kernel is kept on every reload
OTHER_SLOT = """
from pkg.experts import Experts, Kernel


class MoEMethod:
    def process_weights_after_loading(self, layer):
        kernel = Kernel(Experts(4))
        if getattr(self, "other", None) is None:
            self.kernel = kernel

    def apply(self, layer, x):
        return self.kernel.run(x)
"""

# look-alike: a second method stores a new kernel on every reload
ALSO_REBUILT = """
from pkg.experts import Experts, Kernel


class MoEMethod:
    def process_weights_after_loading(self, layer):
        kernel = Kernel(Experts(4))
        if getattr(self, "kernel", None) is None:
            self.kernel = kernel

    def apply(self, layer, x):
        return self.kernel.run(x)


class OtherMethod:
    def process_weights_after_loading(self, layer):
        self.kernel = Kernel(Experts(8))

    def apply(self, layer, x):
        return self.kernel.run(x)
"""

# the first-use test is reset by post-load itself before it tests it: rebuilt every time
RESET = """
from pkg.experts import Experts, Kernel


class MoEMethod:
    def process_weights_after_loading(self, layer):
        self.kernel = None
        kernel = Kernel(Experts(4))
        if self.kernel is None:
            self.kernel = kernel

    def apply(self, layer, x):
        return self.kernel.run(x)
"""


def _rl108(tmp_path, method: str) -> list:
    res = check_files(
        tmp_path, {"pkg/__init__.py": "", "pkg/experts.py": EXPERTS, "pkg/method.py": method}
    )
    return [(f.rule, f.target) for f in res.findings if f.rule == "RL108"]


def test_kept_kernel_keeps_its_experts_lazy_scratch(tmp_path):
    assert _rl108(tmp_path, KEPT) == []


def test_object_built_behind_its_first_use_test_is_kept(tmp_path):
    assert _rl108(tmp_path, BY_HAND) == []


def test_first_use_test_of_another_slot_does_not_keep(tmp_path):
    assert _rl108(tmp_path, OTHER_SLOT) == [("RL108", "self._scratch")]


def test_a_store_on_every_reload_elsewhere_keeps_it_reported(tmp_path):
    assert _rl108(tmp_path, ALSO_REBUILT) == [("RL108", "self._scratch")]


def test_a_first_use_test_the_post_load_resets_does_not_keep(tmp_path):
    assert _rl108(tmp_path, RESET) == [("RL108", "self._scratch")]


def test_kept_base_class_leaves_a_subclass_built_on_every_reload_reported(tmp_path):
    sub = """
    from pkg.experts import Experts, Kernel


    class BigExperts(Experts):
        pass


    class MoEMethod:
        def process_weights_after_loading(self, layer):
            if self.experts is None:
                self.experts = Experts(4)

        def apply(self, layer, x):
            return self.experts.run(x)


    class BigMethod:
        def process_weights_after_loading(self, layer):
            self.kernel = Kernel(BigExperts(4))

        def apply(self, layer, x):
            return self.kernel.run(x)
    """
    res = check_files(
        tmp_path, {"pkg/__init__.py": "", "pkg/experts.py": EXPERTS, "pkg/method.py": sub}
    )
    got = [f for f in res.findings if f.rule == "RL108"]
    assert [(f.rule, f.target) for f in got] == [("RL108", "self._scratch")]
    assert any("BigExperts built here" in s.note for s in got[0].trace)

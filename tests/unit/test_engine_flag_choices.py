"""Flags of `self` known on a path (analysis/flagpaths.py): a method that fixes its experts
class itself on a flag branch of its constructor, instead of asking the oracle, builds only
that class on a post-load path through the same flag test. Off that path, or when another
method may change the flag, every class the stores can hold is still a choice. (`route_classes`
opens with its member test: the code after a returning test at the function's own top level
sees the other members only.)"""

from __future__ import annotations

from _engine_util import check_files

FILES = {
    "pkg/__init__.py": "",
    "pkg/picker.py": """
        from enum import Enum

        import torch


        class Route(Enum):
            LEAN = "LEAN"
            HOARD = "HOARD"


        class LeanExperts:
            def __init__(self, layer):
                self.w = layer.weight

            def run(self, x):
                return x @ self.w


        class HoardExperts:
            def __init__(self, layer):
                self.w = layer.weight
                self.pad = torch.zeros(64, device="cuda")

            def run(self, x):
                return x @ self.w + self.pad[0]


        def route_classes(route):
            if route == Route.LEAN:
                return [LeanExperts]
            return [HoardExperts]


        def pick_route(cfg):
            for r in [Route.HOARD, Route.LEAN]:
                for cls in route_classes(r):
                    return r, cls
            raise ValueError(cfg)
    """,
    "pkg/method.py": """
        from pkg.picker import Route, pick_route, route_classes


        def wants_lean(cfg):
            return cfg.lean


        class RouteMethod:
            def __init__(self, cfg):
                self.lean_only = wants_lean(cfg)
                if self.lean_only:
                    self.route = Route.LEAN
                    self.experts_cls = route_classes(self.route)[0]
                else:
                    self.route, self.experts_cls = pick_route(cfg)

            def process_weights_after_loading(self, layer):
                if self.lean_only:
                    self._build_lean(layer)
                    return
                self.kernel = self.experts_cls(layer)

            def _build_lean(self, layer):
                self.lean_kernel = self.experts_cls(layer)

            def apply(self, layer, x):
                return self.kernel.run(x) + self.lean_kernel.run(x)
    """,
}


def _targets(res) -> set[str]:
    return {f.target for f in res.findings if f.rule == "RL105"}


def test_branch_fixed_class_is_the_only_choice_under_its_flag(tmp_path):
    found = _targets(check_files(tmp_path, FILES))
    # the path past the flag test reads the oracle's choice, which may allocate
    assert "self.kernel" in found
    # the path through it builds the class its own branch fixed, which allocates nothing
    assert "self.lean_kernel" not in found


def test_flag_another_method_sets_is_no_fact(tmp_path):
    files = dict(FILES)
    files["pkg/method.py"] = files["pkg/method.py"].replace(
        "    def apply(self, layer, x):",
        "    def disable_lean(self):\n                self.lean_only = False\n\n"
        "            def apply(self, layer, x):",
    )
    assert "self.lean_kernel" in _targets(check_files(tmp_path, files))

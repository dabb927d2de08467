"""What every fix shape returns, and the statement builders they share."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst


@dataclass
class Store:
    """One flagged element of a store statement: `target` (dotted, `self.x`) gets `value`
    (a local name, or the original expression's source when the store is not a tuple)."""

    target: str
    value: str

    @property
    def base(self) -> str:
        return self.target.rsplit(".", 1)[0]

    @property
    def attr(self) -> str:
        return self.target.rsplit(".", 1)[1]


@dataclass
class Plan:
    """A shape's answer for one store: the statements that replace `target = value`, what
    they need at the module's top, and how the fix is described."""

    shape: str
    applicability: str
    description: str
    code: str  # statements replacing the store, indented from column 0
    needs_tmp: bool = True  # the value must be bound to a local first (read more than once)
    imports: list[tuple[str, str, str | None]] = field(default_factory=list)  # (module, name, as)
    helpers: list[tuple[str, str]] = field(default_factory=list)  # (function name, its source)
    # `refresh`: statements placed before and after the statement that holds the store, which
    # itself stays as written (its guard is what skips the store on later passes)
    prelude: str = ""
    postlude: str = ""


def parse_statements(code: str, config: cst.PartialParserConfig) -> list[cst.BaseStatement]:
    return list(cst.parse_module(code, config=config).body)


def indent(code: str, by: str) -> str:
    return "".join(by + ln if ln.strip() else ln for ln in code.splitlines(keepends=True))

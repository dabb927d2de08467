"""Source text and positions of the lowering (index/extract.py): character columns of
`ast`'s byte offsets, statement spans (a compound statement's end line counts its trailing
comments), one-line suites, `elif`, one-literal strings."""

from __future__ import annotations

import ast

from reload_lint.index.lower_util import (
    _COMPOUND,
    _PREFIX,
    _ends_in_comment,
    _is_blank,
    _last_block,
    _string_tokens,
)


class SourceText:
    """Mixin of the extractor: reads `self.lines`, `self._bytes` and `self._suite`."""

    # ---- source text and positions ---------------------------------------------------
    def col(self, lineno: int, offset: int) -> int:
        """Character column of a UTF-8 byte offset (what ast gives) on line `lineno`."""
        line = self.lines[lineno - 1]
        if line.isascii():
            return offset
        b = self._bytes.get(lineno)
        if b is None:
            b = self._bytes[lineno] = line.encode("utf-8")
        return len(b[:offset].decode("utf-8", "replace"))

    def segment(self, node) -> str:
        return self.text(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)

    def text(self, l0: int, b0: int, l1: int, b1: int) -> str:
        """The source between two ast positions (lines, UTF-8 byte offsets)."""
        c0, c1 = self.col(l0, b0), self.col(l1, b1)
        lines = self.lines
        if l0 == l1:
            return lines[l0 - 1][c0:c1]
        return "\n".join([lines[l0 - 1][c0:], *lines[l0 : l1 - 1], lines[l1 - 1][:c1]])

    def span(self, node) -> tuple[int, int, int]:
        ln = node.lineno
        col = self.col(ln, node.col_offset) + 1
        if type(node) in _COMPOUND:
            return (ln, col, self._end(node))
        return (ln, col, node.end_lineno)

    def _end(self, node) -> int:
        """The line after a compound statement, its blocks' trailing comments included: each
        last block owns the comment/blank lines after it up to the last one indented at least
        as deep as the block (innermost block first)."""
        blocks = []
        s = node
        while type(s) in _COMPOUND:
            if type(s) is ast.If and self.is_elif(s):
                s = s.orelse[0]  # an elif is part of its `if`, not a block of it
                continue
            b = _last_block(s)
            if self.is_suite(b):
                break
            blocks.append(b)
            s = b[-1]
        pos = node.end_lineno
        if not blocks:
            return pos + 1
        lines = self.lines
        run = pos
        while run < len(lines) and _is_blank(lines[run]):
            run += 1
        for b in reversed(blocks):
            first = b[0]
            indent = lines[first.lineno - 1][: self.col(first.lineno, first.col_offset)]
            for ln in range(run, pos, -1):
                if lines[ln - 1].startswith(indent):
                    pos = ln
                    break
        return pos + 1

    def is_suite(self, stmts: list) -> bool:
        """The block is a one-line suite on its header's line (`if x: return`), not an
        indented block."""
        first = stmts[0]
        got = self._suite.get(id(first))
        if got is None:
            ln = first.lineno
            line = self.lines[ln - 1]
            got = bool(line[: self.col(ln, first.col_offset)].strip(" \t\f"))
            if not got and ln >= 2:  # `if x: \` + newline: still the header's logical line
                prev = self.lines[ln - 2]
                got = prev.endswith("\\") and not _ends_in_comment(prev)
            self._suite[id(first)] = got
        return got

    def _int_text(self, node) -> str:
        ln = node.lineno
        line = self.lines[ln - 1]
        if line.isascii():
            return line[node.col_offset : node.end_col_offset]
        return line[self.col(ln, node.col_offset) : self.col(ln, node.end_col_offset)]

    def _one_token(self, node) -> bool:
        """A string constant written as one literal (not an implicit concatenation)."""
        seg = self.segment(node)
        j = 0
        while seg[j] in _PREFIX:
            j += 1
        q = seg[j]
        quote = q * 3 if seg.startswith(q * 3, j) else q
        if quote not in seg[j + len(quote) : len(seg) - len(quote)]:
            return True
        return len(_string_tokens(seg)) == 1

    def simple_string(self, node) -> bool:
        """A one-literal str/bytes constant (libcst's SimpleString)."""
        return (
            type(node) is ast.Constant
            and type(node.value) in (str, bytes)
            and self._one_token(node)
        )

    def is_elif(self, node) -> bool:
        """`node.orelse` is an `elif` (not an `else:` block holding one `if`)."""
        o = node.orelse
        if len(o) != 1 or type(o[0]) is not ast.If:
            return False
        e = o[0]
        return self.lines[e.lineno - 1].startswith("elif", self.col(e.lineno, e.col_offset))

"""Aligned text tables for people reading a terminal (``table describe``, ``scan --output table``).

Columns only ever grow: a streaming writer keeps one :class:`TextTable` and prints each poll's rows
as they come, re-printing the header only when a wider value moved the columns. Nothing is
buffered beyond the rows handed to one :meth:`TextTable.render` call.
"""

from __future__ import annotations

from typing import Any, Sequence

_NUMBERS = (int, float)


class TextTable:
    def __init__(self, header: Sequence[str]) -> None:
        self.header = [str(name) for name in header]
        self._widths = [len(name) for name in self.header]
        self._header_printed_at: list[int] | None = None

    def render(self, rows: Sequence[Sequence[Any]]) -> list[str]:
        """Lines for ``rows`` (cells already text or numbers), preceded by the header when needed."""
        cells = [[_text(value) for value in row] for row in rows]
        for row in cells:
            self._widths = [max(width, len(cell)) for width, cell in zip(self._widths, row)]
        lines: list[str] = []
        if self._header_printed_at != self._widths:
            self._header_printed_at = list(self._widths)
            lines.append(self._line(self.header, [False] * len(self.header)))
            lines.append("  ".join("-" * width for width in self._widths))
        for raw, row in zip(rows, cells):
            lines.append(self._line(row, [isinstance(value, _NUMBERS) and not isinstance(value, bool) for value in raw]))
        return lines

    def _line(self, cells: Sequence[str], right: Sequence[bool]) -> str:
        parts = [cell.rjust(width) if r else cell.ljust(width) for cell, width, r in zip(cells, self._widths, right)]
        return "  ".join(parts).rstrip()


def _text(value: Any) -> str:
    return "null" if value is None else str(value)


def render_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A whole table at once, for small outputs such as ``table describe``."""
    return "\n".join(TextTable(header).render(rows))

"""Byte counts as people read them in log lines: ``512 B``, ``64.0 KiB``, ``1.5 GiB``, never ``0.0 MB``."""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def human_size(size: int | float) -> str:
    """``size`` bytes in the largest binary unit that keeps the number at least 1."""
    value = float(size)
    for unit in _UNITS[:-1]:
        if abs(value) < 1024:
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} {_UNITS[-1]}"

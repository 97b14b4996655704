"""Damage to a segment file as a disk does it."""

from __future__ import annotations

import struct
from pathlib import Path

from lakelog.record.batch import iter_headers


def damage_last_length(path: Path) -> None:
    """Overwrite the length field of the segment's last batch, as a bad sector would."""
    data = bytearray(path.read_bytes())
    last = [position for position, _ in iter_headers(data)][-1]
    data[last + 8 : last + 12] = struct.pack(">i", 0x7FFF0000)
    path.write_bytes(bytes(data))

"""What this tablet server knows it put in a bucket's remote manifest, kept beside the local log.

The manifest is the truth about remote segments, but a manifest that is missing or older than the
last one written (deleted by hand, an S3 hiccup, a restored backup) would otherwise read as "fewer
segments" and make the server delete the rest. The checkpoint lets the server tell "never uploaded"
from "lost": it is written before the first upload and after every manifest write. Its leader epoch
tells a manifest a replaced leader wrote over this server's (an older epoch) after a restart, when
the list this server wrote is no longer in memory.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from lakelog.errors import StorageError
from lakelog.server.log.durable_files import write_atomically
from lakelog.server.remote.manifest import RemoteLogManifest

CHECKPOINT_FILE = "remote-log-checkpoint"


@dataclass(frozen=True)
class RemoteCheckpoint:
    """The version, offset range ``[start_offset, end_offset)`` (-1: empty) and leader epoch (-1:
    none, or a checkpoint from before epochs) of the last manifest written."""

    version: int
    start_offset: int
    end_offset: int
    leader_epoch: int = -1

    @classmethod
    def of(cls, manifest: RemoteLogManifest) -> RemoteCheckpoint:
        return cls(manifest.version, manifest.start_offset, manifest.end_offset, manifest.leader_epoch)

    @classmethod
    def load(cls, directory: Path) -> RemoteCheckpoint | None:
        """The checkpoint in a bucket's log directory, None if this server never wrote one."""
        path = directory / CHECKPOINT_FILE
        try:
            raw = json.loads(path.read_text())
            return cls(int(raw["version"]), int(raw["start_offset"]), int(raw["end_offset"]), int(raw.get("leader_epoch", -1)))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StorageError(f"cannot read the remote log checkpoint {path}: {exc!r}") from None

    def save(self, directory: Path) -> None:
        write_atomically(directory / CHECKPOINT_FILE, json.dumps(asdict(self)).encode())

    def describe(self) -> str:
        described = f"version {self.version}, " + ("no segments" if self.end_offset < 0 else f"offsets [{self.start_offset}, {self.end_offset})")
        return described + (f", leader epoch {self.leader_epoch}" if self.leader_epoch >= 0 else "")

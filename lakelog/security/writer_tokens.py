"""Writer tokens: proof that the coordinator issued a writer id to the caller that uses it.

A writer id is stamped in every batch header, where every reader sees it, and ids are handed out
in sequence, so an id alone proves nothing: a client that sent another live writer's id, epoch and
next sequence would have its batch appended under that writer. So the coordinator hands each
writer, with its id, a token: an HMAC of the id and the caller's principal (the name of the token
the caller authenticated with; empty with authentication off) under a key the coordinator keeps in
its store and gives every tablet server when it registers. A tablet server computes the HMAC again
for each produce that carries a writer id: no lookup, no state per writer, and an id the
coordinator never issued, or issued to another principal, is refused. With authentication off
every caller is the same principal, so a client that copies a live writer's id and token from its
own traffic is only stopped by the bucket's check that a resend is the same batch
(:mod:`lakelog.server.log.writer_state`): the real writer is refused loudly, never answered as a
duplicate.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import struct
from dataclasses import dataclass

from lakelog.errors import UnknownWriterError

KEY_BYTES = 32
TOKEN_BYTES = 16
_WRITER_ID = struct.Struct(">q")


@dataclass(frozen=True)
class WriterIdentity:
    """What InitWriter hands a writer: its id and the token to send with its batches."""

    writer_id: int
    token: bytes


def new_writer_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


class WriterTokens:
    """Issues and checks writer tokens under one key."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def issue(self, writer_id: int, principal: str) -> bytes:
        return hmac.new(self._key, _WRITER_ID.pack(writer_id) + principal.encode(), hashlib.sha256).digest()[:TOKEN_BYTES]

    def check(self, writer_id: int, principal: str, token: bytes, where: str) -> None:
        """Raises :class:`UnknownWriterError` unless ``token`` is the one issued for ``writer_id`` to
        ``principal``."""
        if not hmac.compare_digest(self.issue(writer_id, principal), token):
            caller = f"principal {principal!r}" if principal else "this caller"
            raise UnknownWriterError(
                f"{where}: writer id {writer_id} was not issued to {caller} by the coordinator (its writer token "
                f"does not match); a writer gets its id and token from InitWriter"
            )

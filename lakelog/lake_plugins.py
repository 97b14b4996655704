"""Finding the lake plugin of a format: an entry point named after ``table.datalake.format`` in the
group ``lakelog.lake_storage``, loaded by the coordinator (to create lake tables) and by clients
(to read them).

Exactly one installed plugin may claim a format: with two, which one ``importlib`` lists first
depends on install order, so a silent pick could read a lake with the wrong code. That, a missing
plugin and one that fails to load are configuration errors naming the plugins involved.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from lakelog.errors import InvalidConfigError
from lakelog.log_source import LakeStorage

ENTRY_POINT_GROUP = "lakelog.lake_storage"


def load_lake_storage(lake_format: str) -> LakeStorage:
    """A new instance of the one plugin installed for ``lake_format``."""
    claims = {entry.value: entry for entry in entry_points(group=ENTRY_POINT_GROUP, name=lake_format)}
    if not claims:
        raise InvalidConfigError(f"no lake plugin for format {lake_format!r} is installed (entry-point group {ENTRY_POINT_GROUP!r})")
    if len(claims) > 1:
        raise InvalidConfigError(
            f"{len(claims)} lake plugins claim format {lake_format!r} (entry-point group {ENTRY_POINT_GROUP!r}): "
            f"{' and '.join(sorted(claims))}; uninstall all but one"
        )
    entry = next(iter(claims.values()))
    try:
        storage = entry.load()()
    except Exception as exc:  # noqa: BLE001 - whatever stops a plugin from loading, the user must see which one
        raise InvalidConfigError(f"lake plugin {entry.value} for format {lake_format!r} cannot load: {type(exc).__name__}: {exc}") from exc
    if not isinstance(storage, LakeStorage):
        raise InvalidConfigError(f"lake plugin {entry.value} for format {lake_format!r} is not a lakelog.LakeStorage")
    return storage

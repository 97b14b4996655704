"""The lake-enabled tables of a cluster: what a tiering job tiers by default, and the tables whose
consistent cuts with a table an expiry must keep."""

from __future__ import annotations

from lakelog.client.admin import Admin
from lakelog.metadata import TablePath


def lake_enabled_tables(admin: Admin) -> list[TablePath]:
    return [
        TablePath(database, name)
        for database in admin.list_databases()
        for name in admin.list_tables(database)
        if admin.get_table_info(TablePath(database, name)).lake_enabled
    ]

"""A real PostgreSQL server for tests: Debian's postgresql 15, initdb into a temporary directory and
started with pg_ctl on loopback, on a free port. It holds the shared Iceberg catalog (PyIceberg's SQL
catalog) the way a real deployment's catalog database would. ``make test`` installs the package.

PostgreSQL refuses to run as root, so under root (CI) its files belong to, and its commands run as,
the ``postgres`` user Debian's package creates.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.harness.s3 import free_port

BIN_DIR = Path("/usr/lib/postgresql/15/bin")
USER = "lakelog"
DATABASE = "lakelog_catalog"


class PostgresServer:
    """``start()`` then ``uri`` (SQLAlchemy, psycopg2 driver); ``stop()`` removes everything."""

    def __init__(self) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="lakelog-postgres-"))
        self._as_postgres = os.geteuid() == 0

    @property
    def uri(self) -> str:
        return f"postgresql+psycopg2://{USER}@127.0.0.1:{self.port}/{DATABASE}"

    def _run(self, *argv: str) -> None:
        command = [str(BIN_DIR / argv[0]), *argv[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.root)
        assert result.returncode == 0, f"{argv[0]} failed: {result.stdout[-2000:]}{result.stderr[-2000:]}"

    def start(self) -> "PostgresServer":
        assert (BIN_DIR / "initdb").exists(), f"PostgreSQL 15 is not installed at {BIN_DIR} (make test installs it)"
        if self._as_postgres:
            owner = pwd.getpwnam("postgres")
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        data = self.root / "data"
        self._run("initdb", "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c max_connections=200"
        self._run("pg_ctl", "-D", str(data), "-o", options, "-l", str(self.root / "server.log"), "-w", "start")
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, DATABASE)
        return self

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

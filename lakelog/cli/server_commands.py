"""`lakelog server`, `lakelog coordinator`, `lakelog tablet-server`: run the servers in the foreground."""

from __future__ import annotations

import argparse
import signal
import threading
from typing import Any

from lakelog.config import Configuration
from lakelog.logging_config import configure_logging

_ROLES = {
    "server": (("coordinator", "tablet-server"), "Run a coordinator and a tablet server in one process (the embedded default)."),
    "coordinator": (("coordinator",), "Run a coordinator alone."),
    "tablet-server": (("tablet-server",), "Run a tablet server that registers with --coordinator."),
}


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE.yaml", help="configuration file (keys: `lakelog config`)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="set one key (repeatable)")


def register(subparsers: Any) -> None:
    for name, (roles, help_text) in _ROLES.items():
        parser = subparsers.add_parser(name, help=help_text, description=help_text)
        parser.add_argument("--data-dir", help="data directory (key data.dir, default ./data)")
        parser.add_argument("--host", help="bind address (key server.host, default 127.0.0.1)")
        parser.add_argument("--port", type=int, help="port (key server.port, default 9123)")
        if "coordinator" not in roles:
            parser.add_argument("--coordinator", metavar="HOST:PORT", help="coordinator to register with")
            parser.add_argument("--server-id", type=int, help="tablet server id (key tablet-server.id)")
        add_config_arguments(parser)
        parser.set_defaults(handler=_run, roles=roles)


def _run(args: argparse.Namespace) -> int:
    from lakelog.server.server_process import ServerProcess

    configure_logging()
    flags = {
        "data.dir": args.data_dir,
        "server.host": args.host,
        "server.port": args.port,
        "coordinator.address": getattr(args, "coordinator", None),
        "tablet-server.id": getattr(args, "server_id", None),
    }
    conf = Configuration.load(args.config, args.set, flags)
    process = ServerProcess(conf, args.roles).start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: threading.Thread(target=process.stop, name="shutdown").start())
    print(f"lakelog {args.command} listening on {process.address}", flush=True)
    process.wait()
    return 0

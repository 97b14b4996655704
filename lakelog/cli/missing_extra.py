"""The one-line answer when a command needs an optional dependency group that is not installed.

A plain ``pip install lakelog`` is a client; running servers, the lake or the tiering job needs an
extra. Without this, the user would see a ``ModuleNotFoundError`` traceback and have to guess which.
"""

from __future__ import annotations

# Top-level modules of the optional groups in pyproject.toml, and the group that brings each.
EXTRA_OF_MODULE = {
    "grpc_reflection": "server",
    "grpc_health": "server",
    "prometheus_client": "server",
    "pyiceberg": "lake",
    "pyspark": "spark",
}


def missing_extra_message(error: ModuleNotFoundError) -> str | None:
    """The line to print for ``error``, or None when the missing module is no optional group's."""
    module = (error.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return f"lakelog: this command needs {module}, which is not installed: pip install 'lakelog[{extra}]'"

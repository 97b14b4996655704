"""The installed lakelog's version, as the package metadata records it (``lakelog.__version__``)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lakelog")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"

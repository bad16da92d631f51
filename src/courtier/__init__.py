"""courtier: a polite, large-scale web crawler."""

from importlib.metadata import PackageNotFoundError, version

try:  # the installed package's metadata is the one source (pyproject.toml's version)
    __version__ = version("courtier")
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]

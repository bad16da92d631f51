"""courtier: a polite, large-scale web crawler."""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed package's metadata (pyproject.toml's
    version, the one source) on first use: importlib.metadata costs ~50 ms at start-up,
    which every command paid for a version only ``--version`` and the API print."""
    if name != "__version__":
        raise AttributeError(f"module 'courtier' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("courtier")
    except PackageNotFoundError:  # pragma: no cover - a source tree never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found

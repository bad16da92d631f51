"""courtier: a polite, large-scale web crawler."""

__version__ = "0.1.0"

__all__ = ["__version__"]

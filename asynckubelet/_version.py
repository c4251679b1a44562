"""The package's version, in a leaf module the package's own modules import without
importing the top package (whose public names sit above every layer)."""

__version__ = "0.1.0"

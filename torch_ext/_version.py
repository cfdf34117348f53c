"""The package version, in one place: torch_ext.__version__, and setup.py reads it from this file."""

__version__ = "0.6.0.dev0"

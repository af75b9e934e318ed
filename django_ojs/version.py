"""The package's version (pyproject.toml says the same): imported by the face and by what reports it."""

__version__ = "0.1.0"

"""capplan: optimization-based GPU capacity planning."""

__version__ = "0.1.0"

"""envsnap: capture, diff and restore the environment of GPU hosts."""

__version__ = "0.1.0"

"""The collector program that runs on the host.

Stdlib-only and Python >= 3.8: it runs under whatever interpreter the host has (often the
ML venv's python). It is shipped as one payload (see envsnap/hosts/payload.py), prints one JSON
document, and never imports torch or runs pip.
"""

"""Where the checkout and the recorded test data are, wherever a test module sits."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]   # the checkout: tests/helpers/paths.py
TESTS = ROOT / "tests"
DATA = TESTS / "data"

"""A Python warning printed between collect_env's first line and its report, its message
over several lines (torch's `sm_90 is not compatible` warning: its message starts with a
newline), as Python's own warnings.formatwarning writes it: `file:line: Category: ` then the
message, then the source line indented. Every line of it is passed over as the warning's,
and the report, from its first line, is read whole."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from envsnap.imports import build, paste

RECORDING = Path(__file__).resolve().parents[2] / "data" / "h200" / "collect_env.txt"
MESSAGE = ("\nNVIDIA H100 PCIe with CUDA capability sm_90 is not compatible with the current "
           "PyTorch installation.\nThe current PyTorch install supports CUDA capabilities "
           "sm_37 sm_50 sm_60 sm_70.\nIf you want to use the NVIDIA H100 PCIe GPU with "
           "PyTorch, please check the instructions at https://pytorch.org/get-started/locally/"
           "\n")


@pytest.mark.parametrize("copied", ["as printed", "trailing spaces trimmed"])
def test_a_warning_of_several_lines_inside_the_report_is_passed_over(copied: str) -> None:
    warning = warnings.formatwarning(
        MESSAGE, UserWarning, "/opt/venv/lib/python3.10/site-packages/torch/cuda/__init__.py",
        173, "warnings.warn(incompatible_device_warn.format(device_name, capability))")
    first, rest = RECORDING.read_text().split("\n", 1)
    text = f"{first}\n{warning}{rest}"
    if copied != "as printed":
        text = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    pasted = build.read_pasted(build.Source("paste.txt", text))
    assert [r.tool for r in pasted.readings] == ["torch collect_env"]
    assert pasted.broken == []
    said = warning.splitlines()           # the paste's lines 2 .. 1 + len(said)
    expected = {2: "a Python warning", 1 + len(said): "a Python warning's source line"}
    expected.update({2 + k: "a Python warning's message" for k in range(1, len(said) - 1)
                     if said[k].strip()})
    assert {s.line: s.why for s in pasted.skipped} == expected
    whole = build.read_pasted(build.Source("paste.txt", RECORDING.read_text())).readings[0]
    assert pasted.readings[0].facts == whole.facts


def test_a_report_line_under_a_warning_is_not_taken_for_its_message() -> None:
    text = ("/x.py:1: UserWarning:\nPyTorch version: 2.0.1\nIs debug build: False\n"
            "  warnings.warn(x)\n")
    assert not paste.in_warning_message(text.splitlines(), 1)

"""`envsnap import` of conda's lists and uv's: the pastes of public threads and uv's own
recorded outputs (tests/data/pastes, its README names each source). Every conda row lands in
python_env.conda, its Python distributions in packages; uv's list equals what the agent
recorded of the same environment; a truncated or mixed file names its line, exits 4 and
stores nothing."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from helpers.imported import H200, save_capture

from envsnap.snapshot.store import Store

PASTES = Path(__file__).resolve().parent.parent / "data" / "pastes"
AGENT = json.loads((PASTES / "uv_agent.json").read_text())


def imported(cli: Cli, path: Path, label: str) -> dict[str, Any]:
    result = cli("import", str(path), "--label", label)
    assert result.returncode == 0, result.stderr
    return dict(Store(cli.env["ENVSNAP_STORE"]).load(label))


def source_of(document: dict[str, Any]) -> dict[str, Any]:
    (source,) = document["meta"]["imported"]["sources"].values()
    return dict(source)


def rows_in(path: Path) -> list[list[str]]:
    """The file's package rows as conda printed them: every line not a comment."""
    lines = path.read_text().splitlines()
    return [line.replace("=", " ").split() for line in lines
            if line.strip() and not line.startswith("#")]


CONDA = {   # file -> (tool, format, the prefix its header names)
    "conda_list_pytorch_32369.txt": ("conda list", "table",
                                     "/home/rgommers/anaconda3/envs/pytorch-condabug"),
    "conda_list_gamora_2.txt": ("conda list", "table", "/home/nanwu/anaconda3/envs/pytorch"),
    "conda_list_pytorch3d_1538.txt": ("conda list", "table", "/home/seita/miniconda3/envs/seuss"),
    "conda_list_pytorch3d_931.txt": ("conda list", "table", None),
    "conda_list_conda_13413.txt": ("conda list", "table",
                                   "C:\\Users\\Vy Ho\\.conda\\envs\\pytorch"),
    "conda_list_conda_recipes_813.txt": ("conda list", "table",
                                         "C:\\ProgramData\\Anaconda3\\envs\\tfenv"),
    "conda_list_powerai_268.txt": ("conda list", "table", "/home/miranda9/.conda/envs/"
                                   "automl-meta-learning_wmlce-v1.6.1-py3.6"),
    "conda_list_export_conda_10997.txt": ("conda list --export", "export (win-64)", None),
    "conda_list_export_pytorch3d_1246.txt": ("conda list --export", "export (linux-64)", None),
}


def test_every_conda_row_of_the_public_pastes_is_read(cli: Cli) -> None:
    for number, (name, (tool, form, prefix)) in enumerate(sorted(CONDA.items())):
        document = imported(cli, PASTES / name, f"conda-{number}")
        assert (source_of(document)["tool"], source_of(document)["format"]) == (tool, form)
        python_env = document["facts"]["python_env"]
        conda = python_env["conda"]
        assert [[n, conda[n]["version"], conda[n]["build"]] for n in conda] == \
            [row[:3] for row in rows_in(PASTES / name)], name
        assert python_env.get("interpreter", {}).get("prefix") == prefix
        assert document["meta"]["imported"]["complete"] == ["python_env.conda"]
        # what pip installed, and conda's Python builds, are distributions; libraries are not
        wanted = {n for n, row in conda.items() if row["build"].startswith(("py", "<pip>"))
                  or row.get("channel") == "pypi"}
        assert {n.replace("_", "-").replace(".", "-") for n in wanted} == \
            set(python_env.get("packages", {})), name


def test_conda_s_channels_as_it_prints_them(cli: Cli) -> None:
    plain = imported(cli, PASTES / "conda_list_pytorch_32369.txt", "a")["facts"]["python_env"]
    assert plain["conda"]["cudatoolkit"] == {
        "version": "10.1.243", "build": "h6bb024c_0", "channel": "defaults"}   # left blank
    assert plain["packages"] == {"certifi": "2019.11.28"}    # the one Python build in it
    old = imported(cli, PASTES / "conda_list_conda_recipes_813.txt", "b")["facts"]["python_env"]
    assert old["conda"]["bleach"] == {"version": "1.5.0", "build": "<pip>"}   # pip's, no channel
    assert old["conda"]["freetype"]["channel"] == "anaconda"        # past its [vc14] feature
    assert old["packages"]["bleach"] == "1.5.0" and "cudnn" not in old["packages"]
    urls = imported(cli, PASTES / "conda_list_powerai_268.txt", "c")["facts"]["python_env"]
    assert urls["conda"]["arrow-cpp"]["channel"].startswith("https://public.dhe.ibm.com/")
    export = imported(cli, PASTES / "conda_list_export_pytorch3d_1246.txt", "d")
    assert export["facts"]["python_env"]["conda"]["cudnn"] == {"version": "8.4.1.50",
                                                               "build": "hed8a83a_0"}


def test_two_conda_lists_diff_by_version_and_build_and_a_capture_knows_no_conda(
        cli: Cli) -> None:
    older, newer = PASTES / "conda_list_pytorch_32369.txt", PASTES / "conda_list_pytorch3d_1538.txt"
    result = cli("diff", str(older), str(newer), "--json")
    assert result.returncode == 1, result.stderr
    findings = {tuple(f["path"]): f for f in json.loads(result.stdout)["findings"]
                if f["section"] == "python_env"}
    found = {path: (f["before"], f["after"]) for path, f in findings.items()}
    assert found[("conda", "cudatoolkit", "version")] == ("10.1.243", "10.2.89")
    assert found[("conda", "cudatoolkit", "build")] == ("h6bb024c_0", "hfd86e86_1")
    assert found[("conda", "fvcore")] == (None, {"version": "0.1.5.post20210915",
                                                 "build": "py38", "channel": "fvcore"})
    # the GPU stack ranks above the rest, as pip's packages do
    cuda = findings[("conda", "cudatoolkit", "version")]
    assert cuda["why"] == "conda package cudatoolkit.version 10.1.243 -> 10.2.89"
    assert cuda["rank"] > findings[("conda", "fvcore")]["rank"]
    # a capture reads no conda list: its python_env.conda is unknown, never "removed"
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    against = json.loads(cli("diff", str(older), "mine", "--json").stdout)
    assert not [f for f in against["findings"] if f["path"][:1] == ["conda"]]
    assert ["python_env", "packages", "certifi"] in [[f["section"], *f["path"]]
                                                    for f in against["findings"]]


def conda_row(name: str, version: str, build: str, channel: str = "") -> str:
    """A row as conda/cli/main_list.py prints it: `%-25s %-15s %15s` and `  [features]`
    (none here), then `  channel` unless it is defaults."""
    return f"{name:<25} {version:<15} {build:>15}  " + (f"  {channel}" if channel else "") + "\n"


def test_conda_s_pytorch_is_pip_s_torch_and_its_python_the_interpreter(
        cli: Cli, tmp_path: Path) -> None:
    """conda's own layout; the rows of the environment of pytorch/pytorch#32369 as
    collect_env quoted them (pytorch/pytorch#35646), and a python row of our own (the
    thread's listing is cut before it)."""
    paste = tmp_path / "conda.txt"
    paste.write_text(
        "# packages in environment at /home/rgommers/anaconda3/envs/pytorch-condabug:\n#\n"
        "# Name                    Version                   Build  Channel\n"
        + conda_row("cudatoolkit", "10.1.243", "h6bb024c_0")
        + conda_row("numpy", "1.18.1", "py37h4f9e942_0")
        + conda_row("python", "3.7.6", "h0371630_2")
        + conda_row("pytorch", "1.4.0", "py3.7_cuda10.1.243_cudnn7.6.3_0", "pytorch")
        + conda_row("torchvision", "0.5.0", "py37_cu101", "pytorch"))
    python_env = imported(cli, paste, "conda")["facts"]["python_env"]
    assert python_env["packages"] == {"numpy": "1.18.1", "torch": "1.4.0",
                                      "torchvision": "0.5.0"}
    assert python_env["interpreter"] == {
        "version": "3.7.6", "prefix": "/home/rgommers/anaconda3/envs/pytorch-condabug"}
    assert python_env["conda"]["pytorch"]["channel"] == "pytorch"
    # so torch compares with the capture's torch, not as one package gone and one added
    save_capture(cli.env["ENVSNAP_STORE"], H200, "mine")
    found = {tuple(f["path"]): f["kind"] for f in json.loads(
        cli("diff", str(paste), "mine", "--json").stdout)["findings"]
        if f["section"] == "python_env"}
    assert found[("packages", "torch")] == "changed"
    assert found[("interpreter", "version")] == "changed"


@pytest.mark.parametrize(("name", "form"), [("uv_pip_list.txt", "columns"),
                                            ("uv_pip_list.json", "json"),
                                            ("uv_pip_list_default_venv.txt", "columns")])
def test_uv_pip_list_equals_what_the_agent_recorded(cli: Cli, name: str, form: str) -> None:
    document = imported(cli, PASTES / name, "uv")
    assert (source_of(document)["tool"], source_of(document)["format"]) == ("uv pip list", form)
    agent = AGENT[name.replace(".json", ".txt").removesuffix(".txt")]
    python_env = document["facts"]["python_env"]
    assert python_env["packages"] == agent["packages"]
    assert document["meta"]["imported"]["complete"] == ["python_env.packages"]
    # stderr's `Using Python 3.11.2 environment at: /tmp/uvrec/venv`, where the paste has it
    expected = agent["interpreter"] if name == "uv_pip_list.txt" else None
    assert python_env.get("interpreter") == expected


def cut_row(path: Path, line: int, keep: int) -> str:
    """The file up to `line` (1-based), that line cut to `keep` characters."""
    lines = path.read_text().splitlines(keepends=True)
    return "".join(lines[:line - 1]) + lines[line - 1][:keep] + "\n"


# A line that breaks a list in the middle is named, with its number, and the rest is read.
BROKEN = {
    "conda-list": (lambda: cut_row(PASTES / "conda_list_pytorch_32369.txt", 17, 32),
                   ":17: passed over 'libpng                    1.6.37' (cannot read"),
    "conda-export": (lambda: cut_row(PASTES / "conda_list_export_conda_10997.txt", 10, 14),
                     ":10: passed over 'beautifulsoup4' (cannot read"),
}
BAD = {
    "uv-truncated": (lambda: cut_row(PASTES / "uv_pip_list.txt", 2, 99),
                     ":3: truncated uv pip list: no rule of dashes under its header"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_line_that_breaks_a_list_is_named_and_the_rest_read(cli: Cli, tmp_path: Path,
                                                               case: str) -> None:
    text, expected = BROKEN[case]
    bad = tmp_path / f"{case}.txt"
    bad.write_text(text())
    result = cli("import", str(bad), "--label", "read")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"warning: {bad}{expected}" in result.stderr and "the rest of the report read" \
        in result.stderr, result.stderr
    # a list with a gap is not given whole: a package missing there is unknown, not removed
    assert Store(cli.env["ENVSNAP_STORE"]).load("read")["meta"]["imported"]["complete"] == []


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_conda_or_uv_file_names_its_line_exits_4_and_stores_nothing(
        cli: Cli, tmp_path: Path, case: str) -> None:
    text, expected = BAD[case]
    bad = tmp_path / f"{case}.txt"
    bad.write_text(text())
    result = cli("import", str(bad), "--label", "never")
    assert result.returncode == 4, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and f"{bad}{expected}" in result.stderr, \
        result.stderr
    store = Path(cli.env["ENVSNAP_STORE"])
    assert not store.exists() or list(store.iterdir()) == []

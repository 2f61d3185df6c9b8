"""The playbook engine on `local`: loading with lines, variables, when/loop/register, check mode."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from conftest import Cli
from helpers.paths import ROOT

from envsnap.errors import PlaybookError, UsageError
from envsnap.hosts.inventory import Inventory
from envsnap.playbook.load import load, parse_extra_vars
from envsnap.playbook.location import Where
from envsnap.playbook.run import Event, RunOptions, RunResult, TaskResult, run_playbook
from envsnap.snapshot.store import Store


def write(tmp_path: Path, text: str, name: str = "play.yml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def play(tmp_path: Path, text: str, inventory: Inventory | None = None,
         **options: Any) -> RunResult:
    options.setdefault("limit", ("local",))
    events: list[Event] = []
    result = run_playbook(load(write(tmp_path, text)), inventory or Inventory(None),
                          Store(tmp_path / "store"), RunOptions(**options), events.append)
    assert [e for e in events if isinstance(e, TaskResult)] == result.results
    return result


def messages(result: RunResult) -> list[str]:
    return [r.msg for r in result.results]


def error_of(tmp_path: Path, text: str, **options: Any) -> str:
    with pytest.raises(PlaybookError) as caught:
        play(tmp_path, text, **options)
    return str(caught.value)


# ---- errors name file:line -------------------------------------------------------------------

def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, "- hosts: all\n  tasks:\n    - debug: [unclosed\n")
    assert message.startswith(f"{tmp_path / 'play.yml'}:4: YAML error")


def test_unknown_module_names_its_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, "- hosts: all\n  tasks:\n    - name: x\n      gti: {}\n")
    assert message.startswith(f"{tmp_path / 'play.yml'}:4: unknown module 'gti'")
    assert "git" in message


def test_undefined_variable_is_found_before_anything_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    message = error_of(tmp_path, f"""- hosts: all
  tasks:
    - shell: touch {marker}
    - debug:
        msg: "hello {{{{ foo }}}}"
""")
    assert message == f"{tmp_path / 'play.yml'}:5: undefined variable 'foo'"
    assert not marker.exists()


def test_guarded_names_are_not_undefined(tmp_path: Path) -> None:
    result = play(tmp_path, """- hosts: all
  tasks:
    - debug: "{{ foo | default('fallback') }}"
    - debug: "never"
      when: foo is defined and foo
""")
    assert [r.status for r in result.results] == ["ok", "skipped"]
    assert result.results[0].msg == "fallback"


def test_undefined_attribute_fails_the_task_with_its_line(tmp_path: Path) -> None:
    result = play(tmp_path, """- hosts: all
  vars:
    box: {a: 1}
  tasks:
    - debug:
        msg: "{{ box.missing }}"
    - debug: never reached
""")
    assert len(result.results) == 1 and result.results[0].invalid
    assert result.results[0].msg.startswith(f"{tmp_path / 'play.yml'}:6: undefined:")
    assert result.outcome == "invalid"


def test_bad_when_names_its_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, "- hosts: all\n  tasks:\n    - debug: x\n      when: a ==\n")
    assert message.startswith(f"{tmp_path / 'play.yml'}:4: bad expression")


def test_unknown_argument_and_bad_choice(tmp_path: Path) -> None:
    unknown = error_of(tmp_path, "- hosts: all\n  tasks:\n    - git:\n        repo: /r\n"
                                 "        action: stash\n        colour: red\n")
    assert unknown.startswith(f"{tmp_path / 'play.yml'}:6: git: unknown argument 'colour'")
    choice = error_of(tmp_path, "- hosts: all\n  tasks:\n    - git: {repo: /r, action: reset}\n")
    assert ":3: git: action 'reset' is not one of" in choice


def test_duplicate_key_and_two_modules(tmp_path: Path) -> None:
    assert ":4: YAML error: duplicate key 'name'" in error_of(
        tmp_path, "- hosts: all\n  tasks:\n    - name: a\n      name: b\n      debug: x\n")
    assert "one module per task" in error_of(
        tmp_path, "- hosts: all\n  tasks:\n    - debug: x\n      fail: y\n")


def test_template_syntax_error_at_load(tmp_path: Path) -> None:
    message = error_of(tmp_path, "- hosts: all\n  tasks:\n    - debug: '{{ oops '\n")
    assert message.startswith(f"{tmp_path / 'play.yml'}:3: template syntax error")


def test_a_block_template_error_names_its_own_line(tmp_path: Path) -> None:
    # The block's text starts on line 5; jinja finds the unclosed {{ at its 3rd line.
    message = error_of(tmp_path, "- hosts: all\n  tasks:\n    - debug:\n        msg: |\n"
                                 "          first\n          second {{ oops\n          third\n")
    assert message.startswith(f"{tmp_path / 'play.yml'}:7: template syntax error")


def test_results_keep_file_and_line_and_a_list_item_names_its_line(tmp_path: Path) -> None:
    result = play(tmp_path, """- hosts: all
  vars:
    box: {a: 1}
  tasks:
    - debug: one
    - debug:
        msg:
          - fine
          - "{{ box.nope }}"
""")
    path = str(tmp_path / "play.yml")
    assert [r.where for r in result.results] == [Where(path, 5), Where(path, 6)]
    assert result.results[1].msg.startswith(f"{path}:9: undefined:")


# ---- variables ---------------------------------------------------------------------------------

PRECEDENCE = """- hosts: all
  vars:
    who: play
  tasks:
    - debug: "{{ who }}"
"""


def test_extra_vars_win_over_play_vars_over_host_vars(tmp_path: Path) -> None:
    inventory = Inventory({"all": {"hosts": {"box": {"ansible_connection": "local",
                                                     "who": "host"}}}})
    assert messages(play(tmp_path, PRECEDENCE, inventory, limit=("box",))) == ["play"]
    assert messages(play(tmp_path, PRECEDENCE, inventory, limit=("box",),
                         extra_vars={"who": "extra"})) == ["extra"]
    no_play_var = PRECEDENCE.replace("  vars:\n    who: play\n", "")
    assert messages(play(tmp_path, no_play_var, inventory, limit=("box",))) == ["host"]


def test_play_vars_render_in_order_and_keep_types(tmp_path: Path) -> None:
    result = play(tmp_path, """- hosts: all
  vars:
    numbers: [1, 2, 3]
    doubled: "{{ numbers | map('int') | map('string') | join(',') }}"
    count: "{{ numbers | length }}"
  tasks:
    - debug: "{{ doubled }} {{ count + 1 }}"
""")
    assert messages(result) == ["1,2,3 4"]


def test_parse_extra_vars(tmp_path: Path) -> None:
    vars_file = write(tmp_path, "fetch: false\nrepos: [/a]\n", "vars.yml")
    parsed = parse_extra_vars(["snapshot=good", "cmd=a=b", '{"n": 3}', f"@{vars_file}"])
    assert parsed == {"snapshot": "good", "cmd": "a=b", "n": 3, "fetch": False, "repos": ["/a"]}
    with pytest.raises(UsageError):
        parse_extra_vars(["no-equals-sign"])


def test_snapshot_variable_loads_the_document(tmp_path: Path) -> None:
    Store(tmp_path / "store").save({"schema": 1, "meta": {"host": "local"},
                                    "facts": {"nvidia": {"driver": "590.48.01"}}}, "good")
    result = play(tmp_path, """- hosts: all
  tasks:
    - debug: "{{ snapshot_label }}: {{ snapshot.facts.nvidia.driver }}"
""", extra_vars={"snapshot": "good"})
    assert messages(result) == ["good: 590.48.01"]
    with pytest.raises(UsageError, match="no snapshot labelled 'bad'"):
        play(tmp_path, "- hosts: all\n  tasks:\n    - debug: x\n", extra_vars={"snapshot": "bad"})


def test_missing_snapshot_variable_says_how_to_give_one(tmp_path: Path) -> None:
    message = error_of(tmp_path, "- hosts: all\n  tasks:\n    - debug: '{{ snapshot.meta }}'\n")
    assert message.endswith("undefined variable 'snapshot' (give one with -e snapshot=LABEL)")


# ---- when, loop, register, changed_when, ignore_errors --------------------------------------

def test_loop_when_and_register(tmp_path: Path) -> None:
    result = play(tmp_path, """- hosts: all
  tasks:
    - name: echo the big ones
      shell: echo {{ item * 10 }}
      loop: [1, 2, 3]
      when: item >= 2
      register: echoed
    - debug: >-
        {{ echoed.results | rejectattr('skipped') | map(attribute='stdout') | join('+') }}
    - debug: "{{ echoed.changed }} {{ echoed.results[0].item }}"
""")
    statuses = [(r.status, r.item) for r in result.results[:3]]
    assert statuses == [("skipped", 1), ("changed", 2), ("changed", 3)]
    assert messages(result)[3:] == ["20+30", "True 1"]


def test_loop_over_a_mapping_needs_dict2items(tmp_path: Path) -> None:
    result = play(tmp_path, """- hosts: all
  vars:
    envs: {A: "1"}
  tasks:
    - debug: x
      loop: "{{ envs }}"
""")
    assert "use | dict2items" in result.results[0].msg and result.results[0].invalid
    result = play(tmp_path, """- hosts: all
  vars:
    envs: {A: "1"}
  tasks:
    - debug: "{{ item.key }}={{ item.value }}"
      loop: "{{ envs | dict2items }}"
""")
    assert messages(result) == ["A=1"]


def test_failure_stops_the_host_unless_ignored(tmp_path: Path) -> None:
    result = play(tmp_path, """- hosts: all
  tasks:
    - shell: exit 3
      ignore_errors: true
    - shell: echo out; echo why >&2; exit 4
    - debug: never
""")
    assert [(r.status, r.ignored) for r in result.results] == [("failed", True), ("failed", False)]
    assert result.results[1].msg == "exit 4: why"
    assert result.outcome == "failed"
    assert result.recap()["local"] == {"ok": 0, "changed": 0, "unreachable": 0, "failed": 1,
                                       "skipped": 0, "ignored": 1}


def test_changed_when_and_failed_when(tmp_path: Path) -> None:
    result = play(tmp_path, """- hosts: all
  tasks:
    - shell: echo nothing to do
      register: out
      changed_when: "'changed' in out.stdout"
    - shell: echo ERROR
      failed_when: "'ERROR' in result.stdout"
""")
    assert [r.status for r in result.results] == ["ok", "failed"]


# ---- check mode and files ------------------------------------------------------------------

FILES = """- hosts: all
  vars:
    greeting: hello
  tasks:
    - copy:
        dest: {dest}
        content: "{{{{ greeting }}}} world\\n"
    - template:
        src: t.j2
        dest: {dest}.conf
    - shell: touch {dest}.shell
    - shell: echo read-only
      check_mode: false
"""


def test_check_mode_changes_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "out" / "file.txt"
    write(tmp_path, "x={{ greeting }}\n", "t.j2")
    result = play(tmp_path, FILES.format(dest=dest), check=True, diff=True)
    assert [r.status for r in result.results] == ["changed", "changed", "skipped", "changed"]
    assert "+hello world" in result.results[0].diff
    assert "+x=hello" in result.results[1].diff
    assert not (tmp_path / "out").exists()


def test_copy_and_template_back_up_what_they_overwrite(tmp_path: Path) -> None:
    dest = tmp_path / "out" / "file.txt"
    write(tmp_path, "x={{ greeting }}\n", "t.j2")
    dest.parent.mkdir()
    dest.write_text("old content\n")
    dest.chmod(0o640)
    result = play(tmp_path, FILES.format(dest=dest), diff=True)
    assert dest.read_text() == "hello world\n"
    assert oct(dest.stat().st_mode & 0o777) == "0o640"
    backups = list(dest.parent.glob("file.txt.envsnap-backup-*"))
    assert [b.read_text() for b in backups] == ["old content\n"]
    assert "-old content\n+hello world" in result.results[0].diff
    assert (tmp_path / "out" / "file.txt.conf").read_text() == "x=hello\n"
    again = play(tmp_path, FILES.format(dest=dest))
    assert [r.status for r in again.results[:2]] == ["ok", "ok"]
    assert len(list(dest.parent.glob("file.txt.envsnap-backup-*"))) == 1


def test_env_file_writes_a_sitecustomize_block_and_replaces_it(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    site = tmp_path / "sitecustomize.py"
    site.write_text("import apport_python_hook\n")
    text = """- hosts: all
  tasks:
    - env_file:
        path: {site}
        env: {env}
"""
    play(tmp_path, text.format(site=site, env='{NCCL_PROTO: LL, NCCL_MAX_NCHANNELS: "16"}'))
    play(tmp_path, text.format(site=site, env="{NCCL_PROTO: Simple}"))
    content = site.read_text()
    assert content.startswith("import apport_python_hook\n# BEGIN envsnap env")
    assert "environ.setdefault('NCCL_PROTO', 'Simple')" in content
    assert "NCCL_MAX_NCHANNELS" not in content and content.count("# BEGIN") == 1
    # the block sets variables: in a copy, or every later test's envsnap would inherit them
    monkeypatch.setattr(os, "environ", dict(os.environ))
    monkeypatch.delenv("NCCL_PROTO", raising=False)
    namespace: dict[str, Any] = {}
    exec(compile(content.replace("import apport_python_hook\n", ""), "site", "exec"), namespace)
    assert os.environ["NCCL_PROTO"] == "Simple"
    assert len(list(tmp_path.glob("sitecustomize.py.envsnap-backup-*"))) >= 1


def test_assert_facts_on_a_snapshot_reports_drift(tmp_path: Path) -> None:
    Store(tmp_path / "store").save({"schema": 1, "meta": {}, "facts": {
        "nvidia": {"driver": "580.1"}, "git": {"repos": {"/root/sglang": {"head": "abc"}}}}},
        "now")
    result = play(tmp_path, """- hosts: all
  tasks:
    - assert_facts:
        snapshot: now
        that:
          facts.git.repos["/root/sglang"].head: abc
          nvidia.driver: 590.48.01
          nvidia.missing: 1
""")
    failed = result.results[0]
    assert failed.status == "failed" and failed.drift and result.outcome == "drift"
    assert "nvidia.driver: expected '590.48.01', found '580.1'" in failed.msg
    assert "nvidia.missing: expected 1, found nothing" in failed.msg
    assert "sglang" not in failed.msg


def test_assert_facts_same_as_a_snapshot(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.save({"schema": 1, "meta": {}, "facts": {"nvidia": {"driver": "590.48.01"}}}, "good")
    store.save({"schema": 1, "meta": {}, "facts": {"nvidia": {"driver": "590.48.01"}}}, "same")
    store.save({"schema": 1, "meta": {}, "facts": {"nvidia": {"driver": "580.1"}}}, "moved")
    text = """- hosts: all
  tasks:
    - assert_facts:
        snapshot: {now}
        same_as: good
        paths: [nvidia.driver, nvidia.kernel_module.version]
"""
    assert play(tmp_path, text.format(now="same")).outcome == "ok"
    moved = play(tmp_path, text.format(now="moved")).results[0]
    assert moved.drift and moved.data["drifted"] == ["nvidia.driver"]


def test_capture_task_saves_a_snapshot(tmp_path: Path) -> None:
    result = play(tmp_path, """- hosts: all
  tasks:
    - capture: {label: "pre-{{ timestamp }}"}
      register: pre
    - assert_facts:
        snapshot: "{{ pre.label }}"
        that: {meta.host: local}
""")
    assert [r.status for r in result.results] == ["changed", "ok"]
    assert Store(tmp_path / "store").exists(result.results[0].data["label"])


# ---- bench, shipped playbooks ----------------------------------------------------------------

BENCH = """- hosts: all
  tasks:
    - bench:
        cmd: "echo 'gen throughput (token/s): {value}'"
        metric: 'gen throughput \\(token/s\\): ([0-9.]+)'
        repeat: 5
        sample_interval: 0
        baseline: [94, 95, 93, 94.5, 96]
"""


def test_bench_regression_is_drift_and_no_metric_is_a_failure(tmp_path: Path) -> None:
    same = play(tmp_path, BENCH.format(value=94.5)).results[0]
    assert same.status == "changed" and same.data["verdict"]["verdict"] != "regression"
    regressed = play(tmp_path, BENCH.format(value=60))
    assert regressed.results[0].drift and regressed.outcome == "drift"
    assert "regression" in regressed.results[0].msg and "median 60 over 5 runs" in \
        regressed.results[0].msg
    broken = play(tmp_path, BENCH.format(value=60).replace("gen throughput", "nothing", 1))
    assert broken.outcome == "failed" and "no match for --metric" in broken.results[0].msg


PLAYBOOKS = ROOT / "playbooks"


@pytest.mark.parametrize("path", sorted(PLAYBOOKS.rglob("*.yml")), ids=lambda p: p.name)
def test_shipped_playbooks_load(path: Path) -> None:
    assert load(path).plays


def test_capture_playbook_saves_one_snapshot_per_host(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    result = run_playbook(load(PLAYBOOKS / "capture.yml"), Inventory(None), store,
                          RunOptions(limit=("local",), extra_vars={"label": "here"}))
    assert result.outcome == "ok" and store.load("here")["meta"]["host"] == "local"


def test_an_unreachable_host_stops_alone(tmp_path: Path) -> None:
    result = play(tmp_path, "- hosts: all\n  tasks:\n    - debug: one\n    - debug: two\n",
                  limit=("local,127.0.0.1:1",), connect_timeout=2.0)
    by_host = {(r.host, r.status) for r in result.results}
    assert by_host == {("local", "ok"), ("127.0.0.1:1", "ok")}  # debug never connects
    result = play(tmp_path, "- hosts: all\n  tasks:\n    - shell: 'true'\n    - debug: two\n",
                  limit=("local,127.0.0.1:1",), connect_timeout=2.0)
    statuses = [(r.host, r.status) for r in result.results]
    assert ("127.0.0.1:1", "unreachable") in statuses and ("local", "ok") in statuses
    assert "unreachable" in result.results[1].msg and result.outcome == "failed"
    assert result.recap()["127.0.0.1:1"]["unreachable"] == 1


# ---- malformed playbooks and -e values through the real CLI: one line, never exit 70 ----------

DEEP = "[" * 3000 + "]" * 3000   # a few KB of YAML that recursion alone cannot parse

MALFORMED_PLAYBOOKS = [
    ("- hosts:\n  tasks: []\n", "pb.yml:1: hosts is empty"),
    ("- hosts: [1, {a: 1}]\n  tasks: []\n", "pb.yml:1: hosts must be a name"),
    ("- hosts: local\n  tasks:\n    - shell: echo\n      when: [false]\n",
     "pb.yml:4: when must be one expression (a string, e.g. x > 1), not a list"),
    ("- hosts: local\n  tasks:\n    - shell: echo\n      failed_when: {a: 1}\n",
     "pb.yml:4: failed_when must be one expression (a string, e.g. x > 1), not a dict"),
    ("- hosts: local\n  tasks:\n    - shell: [1, 2]\n",
     "pb.yml:3: shell: arguments must be a mapping, not list"),
    ("- ? [a, b]\n  : 1\n  hosts: local\n", "pb.yml:1: YAML error: a key must be a plain value"),
    ("- hosts: local\n  tasks:\n    - debug: {msg: '{{ 10 ** 10000 }}'}\n",
     "pb.yml:3: template error: ValueError: Exceeds the limit"),
    (f"- hosts: local\n  vars: {{x: {DEEP}}}\n", "pb.yml:1: YAML error: nested too deeply"),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED_PLAYBOOKS)
def test_a_malformed_playbook_is_one_line_and_exit_4(cli: Cli, text: str, message: str) -> None:
    (cli.cwd / "pb.yml").write_text(text)
    result = cli("play", "pb.yml")
    assert result.returncode == 4, result.stderr
    assert result.stderr.startswith(f"envsnap: error: {message}"), result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stdout == ""


def test_a_play_without_tasks_runs(cli: Cli) -> None:
    # `tasks: []` and no `tasks:` at all once ended in an internal error (an empty task list
    # made by the loader had no line numbers).
    (cli.cwd / "pb.yml").write_text("- hosts: local\n  vars: {a: 1}\n  tasks: []\n"
                                    "- hosts: local\n")
    result = cli("play", "pb.yml")
    assert result.returncode == 0, result.stderr
    assert "local : ok=0  changed=0" in result.stdout


def test_a_playbook_that_is_not_utf8_is_invalid(cli: Cli) -> None:
    (cli.cwd / "pb.yml").write_bytes(b"\xff\xfe- hosts: local\n")
    result = cli("play", "pb.yml")
    assert result.returncode == 4
    assert result.stderr == "envsnap: error: pb.yml: not a playbook: not UTF-8 text (byte 0)\n"


def test_an_extra_var_that_is_not_utf8_is_refused(cli: Cli) -> None:
    # It reached the task (a copy's dest, a shell command) and failed there as a Python error.
    (cli.cwd / "pb.yml").write_text("- hosts: local\n  tasks:\n    - debug: {msg: '{{ x }}'}\n")
    result = cli("play", "pb.yml", "-e", "x=\udcff")
    assert result.returncode == 2
    assert result.stderr == "envsnap: error: -e 'x=\\udcff': not UTF-8 text\n"


@pytest.mark.parametrize(("content", "message"), [
    (b"\xff\xfe", "-e @vars.yml: not UTF-8 text"),
    (f"a: {DEEP}\n".encode(), "-e @vars.yml: not valid YAML (nested too deeply)"),
    (b"- 1\n- 2\n", "-e @vars.yml: expected a mapping of variables"),
])
def test_a_bad_extra_vars_file_is_one_line_and_exit_2(cli: Cli, content: bytes,
                                                      message: str) -> None:
    (cli.cwd / "pb.yml").write_text("- hosts: local\n  tasks: []\n")
    (cli.cwd / "vars.yml").write_bytes(content)
    result = cli("play", "pb.yml", "-e", "@vars.yml")
    assert result.returncode == 2
    assert result.stderr == f"envsnap: error: {message}\n"

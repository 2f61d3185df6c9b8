"""Typed snapshot records: TypedDicts over the checked mapping, or dataclasses built at load.

envsnap/snapshot/records.py types a snapshot with TypedDicts: document.validate() checks the
mapping (schema.py) and casts it, so typing costs nothing at run time and the document stays
the plain mapping that digests, the diff's tree walk, masking and YAML read. The other way
would build one object per record at load (pydantic's, or dataclasses). This measures that
alternative on bench_schema.py's 5 MB document with the cheapest builder there is: a
slotted dataclass per schema Record (made from schema.py itself, so every record is one),
filled by converters compiled once per spec, the way spec.py compiles its checks.

Prints (only ratios from one run mean anything on a noisy machine):
  yaml load              what every load pays anyway
  validate               schema.py's check of the document
  cast (TypedDict)       what typing the checked document costs at load
  dataclasses build      the alternative, per load               compared with yaml load
  diff pair: build both  the same for bench_diff.py's two snapshots, beside diff() itself
  records.py import      what `import envsnap.snapshot.records` costs (runtime modules
                         import it only under TYPE_CHECKING, so no command pays it)

Its figures (bench/ledger.tsv) are why records.py uses TypedDicts.

Usage: python3 bench/bench_records.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from typing import Any, Callable, cast

import ledger

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from bench_diff import best, cli_env, run_quiet, the_pair  # noqa: E402
from bench_schema import large_document  # noqa: E402

from envsnap.diff.compare import diff  # noqa: E402
from envsnap.snapshot.document import check_document  # noqa: E402
from envsnap.snapshot.schema import DOCUMENT  # noqa: E402
from envsnap.snapshot.spec import AnyValue, ListOf, MapOf, OneOf, Record, Spec  # noqa: E402
from envsnap.snapshot.store import Loader, dump_yaml  # noqa: E402

Build = Callable[[Any], Any]


def builder(spec: Spec, made: dict[int, Build]) -> Build:
    """A converter from a checked value to objects: a Record becomes its dataclass (its rest
    kept in a mapping), maps and lists are rebuilt, scalars pass as they are."""
    if id(spec) in made:
        return made[id(spec)]
    if isinstance(spec, Record):
        return record_builder(spec, made)
    if isinstance(spec, MapOf):
        value = builder(spec.value, made)
        return lambda mapping: {key: value(item) for key, item in mapping.items()}
    if isinstance(spec, ListOf):
        item = builder(spec.item, made)
        return lambda items: [item(element) for element in items]
    if isinstance(spec, OneOf):
        records = [builder(o, made) for o in spec.options if isinstance(o, (Record, MapOf))]
        lists = [builder(o, made) for o in spec.options if isinstance(o, ListOf)]

        def either(value: Any) -> Any:
            if type(value) is dict and records:
                return records[0](value)
            if type(value) is list and lists:
                return lists[0](value)
            return value
        return either
    return lambda value: value      # a scalar, or AnyValue: kept as it is


def record_builder(spec: Record, made: dict[int, Build]) -> Build:
    names = list(spec.fields)
    kind = dataclasses.make_dataclass(
        spec.name.title().replace("_", ""),
        [(name, Any, dataclasses.field(default=None)) for name in names]
        + [("rest", Any, dataclasses.field(default=None))], slots=True)

    def build(value: Any) -> Any:
        known = {name: fields[name](item) for name, item in value.items() if name in fields}
        rest = {name: item for name, item in value.items() if name not in fields}
        return kind(**known, rest=rest or None)
    made[id(spec)] = build
    fields = {name: builder(field, made) for name, field in spec.fields.items()}
    if not isinstance(spec.rest, AnyValue):
        builder(spec.rest, made)
    return build


IMPORT_TIMED = ("import time, envsnap.snapshot.store\n"
                "started = time.perf_counter()\n"
                "import envsnap.snapshot.records\n"
                "print((time.perf_counter() - started) * 1000)")


def import_ms(repeat: int, pycache: str) -> float:
    """What importing records.py costs a fresh interpreter that has loaded the store, timed
    inside it (the median of `repeat` interpreters, bytecode cached)."""
    import statistics
    import subprocess

    env = cli_env(pycache)
    run_quiet([sys.executable, "-c", IMPORT_TIMED], env, (0,))   # writes the bytecode
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", IMPORT_TIMED], env=env, check=True,
                             capture_output=True, text=True).stdout)
        for _ in range(repeat))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import yaml

    text = dump_yaml(large_document())
    loaded = yaml.load(text, Loader=Loader)
    check = check_document()
    check(loaded)
    build = builder(DOCUMENT, {})
    built = build(loaded)
    assert type(built).__name__ == "Snapshot" and type(built.meta).__name__ == "Meta"

    load_s = best(3, lambda: yaml.load(text, Loader=Loader))
    check_s = best(args.repeat, lambda: check(loaded))
    cast_s = best(args.repeat, lambda: cast("Any", loaded))
    build_s = best(args.repeat, lambda: build(loaded))
    print(f"document                 {len(text) / 1e6:9.1f} MB of YAML")
    print(f"yaml load (CSafeLoader)  {load_s * 1000:9.1f} ms")
    print(f"validate (schema.py)     {check_s * 1000:9.1f} ms")
    print(f"cast (TypedDict)         {cast_s * 1e6:9.2f} us")
    print(f"dataclasses build        {build_s * 1000:9.1f} ms   "
          f"({build_s / load_s:.2f} x yaml load, {build_s / check_s:.1f} x validate)")
    ledger.record(__file__, "dataclasses build / validate", build_s / check_s, "x",
                  f"validate {check_s * 1000:.1f} ms (build {build_s * 1000:.1f} ms)")
    pair = the_pair()
    for document in pair:
        check(document)
    pair_build = best(args.repeat, lambda: [build(document) for document in pair])
    pair_diff = best(args.repeat, lambda: diff(*pair))
    print(f"diff pair: build both    {pair_build * 1000:9.1f} ms   "
          f"(envsnap diff() of the pair: {pair_diff * 1000:.1f} ms)")
    with tempfile.TemporaryDirectory() as folder:
        imported = import_ms(args.repeat, folder)
        print(f"records.py import        {imported:9.1f} ms   "
              "(imported under TYPE_CHECKING only)")
    ledger.record(__file__, "records.py import", imported, "ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

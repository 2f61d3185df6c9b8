"""The snapshot's section list (envsnap/agent/sections.py) is the one the schema, the agent's
collectors and the diff's order all follow."""
from __future__ import annotations

from envsnap.agent import runner
from envsnap.agent.sections import SECTIONS
from envsnap.snapshot import schema


def test_every_section_has_its_collector_and_its_schema_in_the_listed_order() -> None:
    assert tuple(runner.COLLECTORS) == SECTIONS
    assert all(runner.COLLECTORS[name]().__module__ == f"envsnap.agent.{name}"
               for name in SECTIONS)
    assert tuple(schema.SECTIONS) == SECTIONS
    assert set(schema.SECTION_SPECS) == set(SECTIONS)   # no schema left without a section

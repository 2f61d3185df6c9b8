"""The charts of an html report, read as a browser's parser reads them (tests/cli/test_charts.py,
tests/e2e/test_report_browser.py): every start tag with its attributes, the <svg class="chart">
elements by name."""
from __future__ import annotations

from html.parser import HTMLParser


class Elements(HTMLParser):
    """Every start tag with its attributes, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {name: value or "" for name, value in attrs}))


def elements(text: str) -> list[tuple[str, dict[str, str]]]:
    parser = Elements()
    parser.feed(text)
    return parser.found


def charts_in(text: str) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """Each <svg class="chart"> by its data-name, with the elements inside it."""
    found: dict[str, list[tuple[str, dict[str, str]]]] = {}
    current: str | None = None
    for tag, attrs in elements(text):
        if tag == "svg" and "chart" in attrs.get("class", "").split():
            current = attrs["data-name"]
            found[current] = []
        elif current is not None:
            found[current].append((tag, attrs))
    return found


def of_class(inside: list[tuple[str, dict[str, str]]], tag: str,
             css: str) -> list[dict[str, str]]:
    return [attrs for name, attrs in inside if name == tag and css in attrs.get("class", "")]

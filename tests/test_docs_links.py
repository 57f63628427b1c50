"""The Markdown a user reads links only to what exists: every relative link of README.md,
CONTRIBUTING.md, BENCHMARKS.md and docs/*.md names a file of the repository, every `#anchor`
a heading of its target (GitHub's slugs), and every page of docs/ is reachable from the index.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "BENCHMARKS.md",
                *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```[^`\n]*\n.*?^```[ \t]*$", re.S | re.M)   # fence lines only


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text())
    return [a or b for a, b in LINK.findall(text)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):       # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_every_docs_page_is_linked_from_the_index():
    index = ROOT / "docs" / "README.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for t in links(index)}
    pages = {p.resolve() for p in (ROOT / "docs").glob("*.md")} - {index.resolve()}
    assert not pages - linked, sorted(p.name for p in pages - linked)


def test_the_readme_is_a_front_page_not_the_reference():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 12_000, "reference material belongs in docs/"
    assert "## The two commands" in readme

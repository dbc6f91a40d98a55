"""The README and docs/*.md link to each other: every local link resolves.

A link `[text](path#anchor)` in README.md or docs/*.md (outside code) must
name a file or folder that exists, relative to the page, and its `#anchor`
a heading of the target page, slugged as GitHub slugs headings.  The README
stays short (issue #32: under 300 lines) and links every docs page."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_MAX_LINES = 300

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


def pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: the rendered text (code marks,
    link targets and emphasis dropped), lower case, punctuation removed,
    each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor in `page`; a repeated slug gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(page.read_text()):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def local_links(page: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link to a local file or anchor in `page`."""
    out = []
    for number, line in prose_lines(page.read_text()):
        for m in LINK.finditer(CODE_SPAN.sub("", line)):
            target = m.group(1)
            if not EXTERNAL.match(target):
                out.append((number, target))
    return out


def broken_links(page: Path) -> list[str]:
    """What is wrong with `page`'s local links, one line each (empty: all resolve)."""
    problems = []
    for number, target in local_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no file {dest}")
        elif anchor:
            if dest.suffix != ".md":
                problems.append(f"{where}: an anchor into {dest.name}, which is not a markdown page")
            elif anchor not in anchors(dest):
                problems.append(f"{where}: no heading with anchor #{anchor} in {dest.name}")
    return problems


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_docs_local_links_resolve(page):
    assert local_links(page) or page != README, "the README links no page"
    assert broken_links(page) == []


def test_readme_is_short_and_links_every_docs_page():
    lines = README.read_text().splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines; move sections to docs/ (limit {README_MAX_LINES})"
    linked = {(README.parent / t.partition("#")[0]).resolve() for _, t in local_links(README) if t.partition("#")[0]}
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert unlinked == [], f"docs pages the README does not link: {unlinked}"


def test_readme_quick_start_is_make_demo_and_make_test():
    text = README.read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in quick and "make test" in quick


@pytest.mark.parametrize("heading, anchor", [
    ("Fused trials (`--fuse N`, issue #20)", "fused-trials---fuse-n-issue-20"),
    ("The paper's claims at a CPU budget", "the-papers-claims-at-a-cpu-budget"),
    ("1. One GPU machine: docker compose", "1-one-gpu-machine-docker-compose"),
    ("What is guaranteed, and the test that shows it", "what-is-guaranteed-and-the-test-that-shows-it"),
    ("Data layout under `--data-root` (default `data`)", "data-layout-under---data-root-default-data"),
    ("summary.json", "summaryjson"),
    ("A [linked](x.md) heading", "a-linked-heading"),
])
def test_slug_follows_github(heading, anchor):
    assert slug(heading) == anchor


def test_broken_links_are_reported(tmp_path):
    """The checker itself: a missing file, a missing anchor and an anchor into
    a non-markdown file are each reported; good links and code are not."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("# Title\n\n## Same\n\n## Same\n\n```\n## Not a heading\n```\n")
    (tmp_path / "img.png").write_bytes(b"\x89PNG")
    page = tmp_path / "a.md"
    page.write_text(
        "# A\n\n"
        "[ok](docs/b.md) [ok](docs/b.md#same-1) ![ok](img.png) [ok](#a) [web](https://example.org/x.md)\n"
        "`[code](nowhere.md)` and\n```\n[fenced](nowhere.md)\n```\n"
        "[gone](docs/c.md) [bad anchor](docs/b.md#same-2) [fenced anchor](docs/b.md#not-a-heading) [png](img.png#x)\n")
    problems = broken_links(page)
    assert len(problems) == 4, problems
    assert "docs/c.md" in problems[0] and "no file" in problems[0]
    assert "#same-2" in problems[1] and "#not-a-heading" in problems[2]
    assert "not a markdown page" in problems[3]

"""The documentation: README.md stays a first page, every link in it and in docs/ resolves,
every page is in the site's nav, the benchmark tables are the files their scripts write,
and the MkDocs site builds in strict mode."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
TABLES = DOCS / "tables"
MKDOCS_YML = REPO / "mkdocs.yml"
README_MAX_LINES = 200

#: pages: every markdown file under docs/ except the included benchmark tables
PAGES = sorted(p for p in DOCS.rglob("*.md") if TABLES not in p.parents)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
INCLUDE = re.compile(r'^--8<-- "([^"]+)"\s*$', re.M)
WRITTEN_BY = re.compile(r"^<!-- written by (\S+); rerun it to update -->$")


def prose(text: str) -> str:
    """``text`` without fenced code blocks and code spans (links there are not links)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc (and, for these headings, GitHub) gives a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"[`*]", "", text)  # code spans and emphasis marks
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in HEADING.findall(FENCE.sub("", page.read_text()))}


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text()))


def local(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)  # no scheme: http:, mailto:, ...


class _Loader(yaml.SafeLoader):
    """mkdocs.yml's tags (``!!python/name:...``) read as plain strings."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: suffix)


def mkdocs_config() -> dict:
    return yaml.load(MKDOCS_YML.read_text(), Loader=_Loader)


def nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return []


def test_readme_is_a_first_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move reference text to docs/"
    assert "make test" in README.read_text() and "make run" in README.read_text()


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        if not local(target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved.relative_to(REPO) if REPO in resolved.parents else resolved}")
            continue
        if page != README and DOCS not in resolved.parents:
            broken.append(f"{target}: outside docs/ (the site cannot link it; write the path as code)")
            continue
        if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor} in {resolved.relative_to(REPO)}")
    assert broken == [], f"{page.relative_to(REPO)}: broken links"


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    listed = nav_pages(mkdocs_config()["nav"])
    pages = [str(p.relative_to(DOCS)) for p in PAGES]
    assert sorted(set(pages) - set(listed)) == [], "pages missing from mkdocs.yml's nav"
    assert sorted(set(listed) - set(pages)) == [], "nav entries without a page"


def test_strict_build_checks_links_anchors_and_included_files():
    config = mkdocs_config()
    assert config.get("validation") == {"omitted_files": "warn", "absolute_links": "warn",
                                        "unrecognized_links": "warn", "anchors": "warn"}
    snippets = next(e["pymdownx.snippets"] for e in config["markdown_extensions"]
                    if isinstance(e, dict) and "pymdownx.snippets" in e)
    assert snippets["check_paths"] is True and snippets["base_path"] == ["docs/tables"]


def included_tables() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for page in PAGES:
        for name in INCLUDE.findall(page.read_text()):
            found.setdefault(name, []).append(page)
    return found


def test_every_included_table_exists_and_every_table_is_included():
    included = included_tables()
    files = {p.name for p in TABLES.glob("*.md")}
    assert sorted(set(included) - files) == [], "pages include tables that docs/tables/ does not have"
    assert sorted(files - set(included)) == [], "tables in docs/tables/ that no page includes"


@pytest.mark.parametrize("table", sorted(TABLES.glob("*.md")), ids=lambda p: p.name)
def test_a_table_is_its_scripts_output(table):
    first = table.read_text().splitlines()[0]
    match = WRITTEN_BY.match(first)
    assert match, f"{table.name} must start with '<!-- written by <script>; rerun it to update -->'"
    script = REPO / match.group(1)
    assert script.is_file(), f"{table.name}: its script {match.group(1)} does not exist"
    source = script.read_text()
    assert "publish_in_docs" in source, f"{match.group(1)} does not write docs tables"
    assert table.stem in source, f"{match.group(1)} never mentions the table {table.stem}"


def test_the_site_builds_strictly(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(MKDOCS_YML),
         "--site-dir", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()
    for page in PAGES:
        built = tmp_path / "site" / page.relative_to(DOCS).with_suffix("") / "index.html"
        if page.name == "index.md":
            built = tmp_path / "site" / page.relative_to(DOCS).parent / "index.html"
        assert built.is_file(), f"{page.relative_to(REPO)} was not built"

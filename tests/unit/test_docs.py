"""The documentation: README.md stays a first page, every link in it and in docs/ resolves,
every page is in the site's nav, the benchmark tables are the files their scripts write,
the MkDocs site builds in strict mode and opens from disk (every link a file, search
offline, nothing from a CDN), and the commands and errors the pages show are the real ones."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import unicodedata
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from tests.generated import keep_current
from tests.imports import GROUPS, PICTURE, picture

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
#: a table of docs/tables/ a page includes (a name alone; a path is a repository file)
INCLUDE = re.compile(r'^--8<-- "([^"/]+)"\s*$', re.M)
#: a repository file a page shows as it is (docs/adding-a-method.md's listings)
LISTING = re.compile(r'^--8<-- "([^"]+/[^"]+)"\s*$', re.M)
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
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; move reference text to docs/"
    )
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
            shown = resolved.relative_to(REPO) if REPO in resolved.parents else resolved
            broken.append(f"{target}: no file {shown}")
            continue
        if page != README and DOCS not in resolved.parents:
            broken.append(
                f"{target}: outside docs/ (the site cannot link it; write the path as code)"
            )
            continue
        if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(
                f"{target}: no heading with anchor #{anchor} in {resolved.relative_to(REPO)}"
            )
    assert broken == [], f"{page.relative_to(REPO)}: broken links"


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    listed = nav_pages(mkdocs_config()["nav"])
    pages = [str(p.relative_to(DOCS)) for p in PAGES]
    assert sorted(set(pages) - set(listed)) == [], "pages missing from mkdocs.yml's nav"
    assert sorted(set(listed) - set(pages)) == [], "nav entries without a page"


def test_strict_build_checks_links_anchors_and_included_files():
    config = mkdocs_config()
    assert config.get("validation") == {
        "omitted_files": "warn",
        "absolute_links": "warn",
        "unrecognized_links": "warn",
        "anchors": "warn",
    }
    snippets = next(
        e["pymdownx.snippets"]
        for e in config["markdown_extensions"]
        if isinstance(e, dict) and "pymdownx.snippets" in e
    )
    assert snippets["check_paths"] is True and snippets["base_path"] == ["docs/tables", "."]


def test_every_listing_a_page_shows_is_a_file_of_the_repository():
    """A listing is the file itself, included when the site is built: it cannot drift."""
    listings = {name for page in PAGES for name in LISTING.findall(page.read_text())}
    assert {"clients/feddecorr.py", "clients/fednh.py", "strategies/fednh.py"} <= listings
    assert all((REPO / name).is_file() for name in listings)


def included_tables() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for page in PAGES:
        for name in INCLUDE.findall(page.read_text()):
            found.setdefault(name, []).append(page)
    return found


def test_every_included_table_exists_and_every_table_is_included():
    included = included_tables()
    files = {p.name for p in TABLES.glob("*.md")}
    assert sorted(set(included) - files) == [], (
        "pages include tables that docs/tables/ does not have"
    )
    assert sorted(files - set(included)) == [], "tables in docs/tables/ that no page includes"


@pytest.mark.parametrize("table", sorted(TABLES.glob("*.md")), ids=lambda p: p.name)
def test_a_table_is_its_scripts_output(table):
    first = table.read_text().splitlines()[0]
    match = WRITTEN_BY.match(first)
    assert match, f"{table.name} must start with '<!-- written by <script>; rerun it to update -->'"
    script = REPO / match.group(1)
    assert script.is_file(), f"{table.name}: its script {match.group(1)} does not exist"
    source = script.read_text()
    writes = ("publish_in_docs", "publish_results")  # benchmarks/common.py's two writers
    assert any(w in source for w in writes), f"{match.group(1)} does not write docs tables"
    assert table.stem in source, f"{match.group(1)} never mentions the table {table.stem}"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as ``make docs`` builds it (strict), once for the tests below."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs is not installed: make install EXTRAS=dev,docs")
    out = tmp_path_factory.mktemp("docs") / "site"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(MKDOCS_YML),
            "--site-dir",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


def test_the_site_builds_strictly(site):
    assert (site / "index.html").is_file()
    for page in PAGES:
        built = site / page.relative_to(DOCS).with_suffix(".html")
        assert built.is_file(), (
            f"{page.relative_to(REPO)} was not built as {built.relative_to(site)}"
        )


class _Targets(HTMLParser):
    """Every href and src of one HTML page, and the scripts it loads."""

    def __init__(self):
        super().__init__()
        self.targets: list[str] = []
        self.scripts: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.targets.append(value)
                if tag == "script" and name == "src":
                    self.scripts.append(value)


def targets(page: Path) -> _Targets:
    parser = _Targets()
    parser.feed(page.read_text())
    return parser


def built_pages(site: Path) -> list[Path]:
    """The pages a reader opens; not 404.html, which only a web server shows (for a
    missing path, so its links are absolute) and no page links to."""
    return sorted(p for p in site.rglob("*.html") if p != site / "404.html")


def test_every_link_of_the_built_site_opens_a_file_from_disk(site):
    """``open site/index.html``: a link to a folder (``running/``) would show a directory
    listing, so every local href and src must name a file."""
    broken = []
    for page in built_pages(site):
        for target in targets(page).targets:
            path = urllib.parse.unquote(target.split("#")[0].split("?")[0])
            if not path or not local(target):
                continue
            resolved = (page.parent / path).resolve()
            if not resolved.is_file():
                broken.append(f"{page.relative_to(site)}: {target}")
    assert broken == [], "links that do not open a file from disk"


def test_the_search_works_without_a_server(site):
    """A page opened from file:// may load scripts but not fetch search_index.json or start
    a web worker: the index comes inlined in search_index.js (which the theme's bundle
    loads there) and the search worker runs through the iframe-worker shim, shipped in
    the site rather than fetched from a CDN."""
    script = site / "search" / "search_index.js"
    assert script.is_file(), "no search/search_index.js: the offline plugin is not on"
    prefix = "var __index = "
    index = json.loads(script.read_text().removeprefix(prefix))
    assert script.read_text().startswith(prefix) and {d["location"] for d in index["docs"]} >= {
        "running.html"
    }
    home = targets(site / "index.html").scripts
    bundle = next(site / s for s in home if "bundle" in s)
    assert "search_index.js" in bundle.read_text(), (
        "the theme's bundle does not load search_index.js"
    )
    assert any(s.endswith("iframe-worker-shim.js") for s in home), "no local iframe-worker shim"


def test_no_page_loads_anything_from_the_network(site):
    remote = []
    for page in built_pages(site):
        text = page.read_text()
        remote += [f"{page.relative_to(site)}: {s}" for s in targets(page).scripts if not local(s)]
        remote += [
            f"{page.relative_to(site)}: {m}"
            for m in re.findall(r'<link[^>]+href="https?:[^"]*"', text)
            if "stylesheet" in m or "preload" in m
        ]
        if 'class="mermaid"' in text:  # the theme draws it with mermaid.js, fetched from a CDN
            remote.append(f"{page.relative_to(site)}: a Mermaid diagram")
    assert remote == [], "pages that load scripts or styles from the network (a CDN)"


def test_wide_code_blocks_wrap():
    css = (DOCS / "stylesheets" / "extra.css").read_text()
    assert "stylesheets/extra.css" in mkdocs_config()["extra_css"]
    assert re.search(r"\.md-typeset pre > code \{[^}]*white-space: pre-wrap", css)


def test_the_architecture_picture_is_drawn_from_the_code():
    """A picture, not a diagram script (the site is read offline): the SVG that
    ``python -m tests.imports`` writes, shown by docs/architecture.md."""
    drawn = picture()
    keep_current(PICTURE, drawn)  # rewritten where out of date (tests.generated)
    assert drawn.startswith("<svg") and all(f">{group}<" in drawn for group in GROUPS)
    assert f"]({PICTURE.relative_to(DOCS).as_posix()})" in (DOCS / "architecture.md").read_text()
    assert "```mermaid" not in (DOCS / "architecture.md").read_text()


# ------------------------------------------------------- commands and messages in the docs
#: commands installed into .venv: a page runs them as .venv/bin/<name> (a bare name runs
#: whatever is first on PATH), or after ``source .venv/bin/activate`` in the same block
VENV_COMMANDS = (
    "fedimb",
    "mlflow",
    "mkdocs",
    "tensorboard",
    "wandb",
    "flwr",
    "flower-superlink",
    "flower-supernode",
    "pip",
    "python",
    "pytest",
)
ENV_ASSIGNMENTS = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+")


def commands(line: str) -> list[str]:
    """The commands a shell line runs (a ``$`` prompt, pipes, ``&&``, ``;``, ``$(...)``
    and ``VAR=value`` prefixes taken off; comments dropped)."""
    if line.lstrip().startswith("#"):
        return []
    line = re.sub(r"^\s*\$\s+", "", re.split(r"\s#", line)[0])
    parts = (ENV_ASSIGNMENTS.sub("", part.strip()) for part in re.split(r"&&|\|\||;|\||\$\(", line))
    return [part for part in parts if part]


def bare_venv_commands(text: str) -> list[str]:
    found = []
    for block in FENCE.finditer(text):
        for line in block.group(0).splitlines()[1:-1]:
            if line.strip().startswith("source .venv/bin/activate"):
                break
            found += [
                line.strip() for command in commands(line) if command.split()[0] in VENV_COMMANDS
            ]
    found += [
        span
        for span in re.findall(r"`([^`]*pip install[^`]*)`", FENCE.sub("", text))
        if not span.startswith((".venv/bin/pip install", "make install"))
    ]
    return found


def test_the_command_check_finds_bare_commands():
    block = "```bash\n{}\n```\n"
    for bare in (
        "pip install -e '.[mlflow]'",
        "fedimb method=fedavg",
        "$ fedimb diagnose",
        "WANDB_MODE=offline fedimb tracking=wandb",
        "cd x && mlflow ui",
        "mkdocs serve",
    ):
        assert bare_venv_commands(block.format(bare)) == [bare]
    for fine in (
        ".venv/bin/fedimb report x  # fedimb report",
        "make install EXTRAS=dev,mlflow",
        "docker run fedimb-edge:arm64 --port 1",
        "source .venv/bin/activate\nflwr run .",
    ):
        assert bare_venv_commands(block.format(fine)) == []
    assert bare_venv_commands("run `pip install x` first") == ["pip install x"]


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: str(p.relative_to(REPO)))
def test_commands_in_the_docs_run_from_the_venv(page):
    assert bare_venv_commands(page.read_text()) == [], (
        f"{page.relative_to(REPO)}: write .venv/bin/<command> (or make install EXTRAS=dev,<extra>)"
    )


#: the commands whose errors the docs quote
ERROR_EXAMPLES = (
    ["method=fedavgg"],
    ["partition=dirichlet", "partition.alpha=0"],
    ["partition.alpha=0.1"],
)
QUOTED_ERROR = re.compile(r"^(fedimb: error: .+)$|`(fedimb: error: [^`]+)`", re.M)


def printed_error(args: list[str]) -> str:
    from fedimb.cli.main import run
    from fedimb.core.errors import FedimbError

    with pytest.raises(FedimbError) as err:
        run(args)
    return f"fedimb: error: {err.value}"


def test_the_errors_the_docs_quote_are_what_fedimb_prints():
    printed = {printed_error(args) for args in ERROR_EXAMPLES}
    quoted = {
        f"{page.relative_to(REPO)}: {a or b}"
        for page in [README, *PAGES]
        for a, b in QUOTED_ERROR.findall(page.read_text())
    }
    stale = sorted(q for q in quoted if q.split(": ", 1)[1] not in printed)
    assert quoted and stale == [], (
        "quoted errors fedimb does not print (or add their command to ERROR_EXAMPLES)"
    )

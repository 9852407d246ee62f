"""fedimb's structure read from its own imports: every module's layer, the imports it
makes at run time, and the package picture in ``docs/architecture.md``, which this
module writes (``python -m tests.imports``) and the tests hold against the code."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
#: the picture of who imports whom that DOC shows: SVG drawn here, so that the page needs
#: no diagram script (the site opens from disk, offline) and GitHub shows it too
PICTURE = REPO / "docs" / "img" / "architecture.svg"
#: lowest first; a module may import from its own layer and the layers below it
LAYERS = ("fedimb.core", "fedimb.app", "methods", "fedimb.cli", "tools")
#: the package and the method folders (the picture, the module table, the layers)
PACKAGE_ROOTS = ("fedimb", "strategies", "clients")
#: what else imports them: benchmark scripts and the edge tooling (circles are checked there too)
TOOL_ROOTS = ("benchmarks", "edge")
#: every folder of the package with its job; a module lives in one of these, and where a
#: folder lists its modules, only those (the front end's and the app's roots stay bare)
FOLDERS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "fedimb": ("`python -m fedimb`", ("__main__",)),
    "fedimb.core": (
        "the math and the data, no Flower runtime: aggregation, losses, training",
        None,
    ),
    "fedimb.core.data": ("data sets, partitioners, the validation split", None),
    "fedimb.core.models": ("models with an encoder/head split", None),
    "fedimb.app": ("the Flower adapters, by job below", ()),
    "fedimb.app.configuration": ("compose, check, save and carry the configuration", None),
    "fedimb.app.server": (
        "the ServerApp, its round loop, checkpoints, the strategy's context",
        None,
    ),
    "fedimb.app.nodes": ("the ClientApp and which node is which client", None),
    "fedimb.app.runtimes": ("what differs per runtime: in process, simulation, deployment", None),
    "fedimb.app.privacy": (
        "differential privacy and secure aggregation (Flower's wrappers, SecAgg+), what "
        "clients reveal",
        None,
    ),
    "fedimb.app.faults": ("deliberate faults and attacks, for the fault and attack matrices", None),
    "fedimb.cli": ("the `fedimb` command's entry point; the rest by job below", ("main",)),
    "fedimb.cli.commands": ("the subcommands: their table and their arguments", None),
    "fedimb.cli.launch": ("start a run: Hydra's task, preflight, runtime, following it", None),
    "fedimb.cli.rundir": ("the run folder: its one writer and its one reader", None),
    "fedimb.cli.federation": ("Flower processes on this machine, certificates, `flwr`", None),
    "fedimb.cli.results": ("finished runs read and compared: report, compare, export", None),
    "fedimb.cli.tune": ("`fedimb tune`: equal-budget tuning with the Optuna sweeper", None),
    "fedimb.cli.tracking": ("MLflow, TensorBoard and W&B trackers", None),
}
#: the boxes of the picture: the layers, with the method and core packages apart
GROUPS = (
    "fedimb.cli",
    "strategies",
    "clients",
    "fedimb.app",
    "fedimb.core",
    "fedimb.core.data",
    "fedimb.core.models",
)


def layer_of(module: str) -> str | None:
    if module.startswith(("strategies", "clients")):
        return "methods"
    if module.split(".")[0] in TOOL_ROOTS:
        return "tools"
    if module in ("fedimb", "fedimb.__main__"):
        return "fedimb.cli"
    return next(
        (layer for layer in LAYERS if module == layer or module.startswith(layer + ".")), None
    )


def group_of(module: str) -> str:
    if module in ("fedimb", "fedimb.__main__"):
        return "fedimb.cli"
    return max((g for g in GROUPS if module == g or module.startswith(g + ".")), key=len)


def folder_of(module: str, path: Path) -> str:
    """The dotted package whose folder holds ``module``."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def misplaced(found: dict[str, Path]) -> list[str]:
    """Modules of ``fedimb`` outside the folders of :data:`FOLDERS`, or in a folder that
    lists its modules and not them."""
    wrong = []
    for module, path in found.items():
        if module.split(".")[0] != "fedimb" or path.name == "__init__.py":
            continue
        job = FOLDERS.get(folder_of(module, path))
        if job is None or (job[1] is not None and module.rpartition(".")[2] not in job[1]):
            wrong.append(module)
    return wrong


def modules(roots: tuple[str, ...] = PACKAGE_ROOTS) -> dict[str, Path]:
    """Every module under ``roots`` (the package and the method folders), by dotted name."""
    found = {}
    for root in roots:
        for path in sorted((REPO / root).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def static_imports(path: Path, known: dict[str, Path] | None = None) -> set[str]:
    """The project modules (of ``known``, default :func:`modules`) that ``path`` imports,
    wherever the import stands: inside a function and under ``if TYPE_CHECKING:`` too, as
    type checkers and import linters read them. Names loaded from a configuration's
    ``_target_`` are not imports."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    known = modules() if known is None else known
    return {m for m in found if m in known}


def first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def group_edges() -> list[tuple[str, str]]:
    edges = set()
    for module, path in modules().items():
        for imported in static_imports(path):
            if group_of(module) != group_of(imported):
                edges.add((group_of(module), group_of(imported)))
    return sorted(edges, key=lambda e: (GROUPS.index(e[0]), GROUPS.index(e[1])))


def document() -> str:
    """The text of docs/architecture.md."""
    lines = [
        "# Architecture",
        "",
        "<!-- written by `python -m tests.imports` from the code's imports; "
        "tests/unit/test_architecture.py fails when it is out of date -->",
        "",
        "fedimb is three layers that import only downwards, with the methods as plug-ins between",
        "the Flower adapters and the front end:",
        "",
        "- **`fedimb/core/`**: the math and the data: aggregation rules, losses, "
        "the training loop,",
        "  models with an encoder/head split, data sets and partitioners, dropout, the payload and",
        "  instruction protocol. No Flower runtime, no Hydra, no processes.",
        "- **`fedimb/app/`**: the Flower adapters: ServerApp and ClientApp, the one round loop",
        "  (every runtime and every test runs rounds through `FedImbServer.run_round`), the client",
        "  registry, checkpoints, and the configuration (compose, validate, carry inside a run).",
        "- **`strategies/` and `clients/`**: one module per method, each half subclassing its base",
        "  (`strategies.base`, `clients.base`); the app loads them by the `_target_` "
        "of the method's",
        "  YAML and never imports them. A strategy imports no client and no other strategy.",
        "- **`fedimb/cli/`**: the `fedimb` command: Hydra front end, Flower processes, run folder,",
        "  report, diagnose, certificates.",
        "",
        "## Folders",
        "",
        "Each folder of the package has one job; a module lives in the folder of its job",
        "(`tests/unit/test_architecture.py` holds the table below against the files).",
        "",
        "| folder | its job |",
        "|---|---|",
        *(f"| `{name.replace('.', '/')}/` | {job} |" for name, (job, _) in FOLDERS.items()),
        "",
        'An arrow reads "imports from"; an import of a group drawn lower runs right of the',
        "boxes, one of a group drawn higher left of them:",
        "",
        f"![Who imports whom: the groups of modules, an arrow for each import between two]"
        f"({PICTURE.relative_to(DOC.parent).as_posix()})",
        "",
        "## Modules",
        "",
        "| module | layer | what it is for |",
        "|---|---|---|",
    ]
    for module, path in modules().items():
        if path.name == "__init__.py" and not first_line(path):
            continue
        purpose = first_line(path).replace("|", "/")
        lines.append(f"| `{path.relative_to(REPO)}` | {layer_of(module)} | {purpose} |")
    return "\n".join(lines) + "\n"


#: the picture's geometry (pixels): one row per group, GROUPS order top to bottom
BOX_X, BOX_W, BOX_H, ROW, TOP, WIDTH = 170, 190, 44, 66, 20, 520
LAYER_NAMES = {
    "fedimb.cli": "front end",
    "methods": "methods",
    "fedimb.app": "Flower adapters",
    "fedimb.core": "core",
}
#: fill and line colour of each layer's boxes and of the imports they make
COLOURS = {
    "fedimb.cli": ("#e3f2fd", "#1565c0"),
    "methods": ("#f3e5f5", "#6a1b9a"),
    "fedimb.app": ("#e8f5e9", "#2e7d32"),
    "fedimb.core": ("#fff3e0", "#e65100"),
}


def _ports(edges: list[tuple[str, str]]) -> dict[tuple[str, str, str], float]:
    """Where each import's arc meets each of its two boxes (keyed by edge and box): the
    arcs on one side of a box nest, the nearest group's at the box's top and bottom."""
    row = {g: i for i, g in enumerate(GROUPS)}
    ports = {}
    for box in GROUPS:
        for right in (True, False):
            ends = [(a, b) for a, b in edges if box in (a, b) and (row[a] < row[b]) == right]
            other = {e: row[e[1] if e[0] == box else e[0]] for e in ends}
            ends.sort(key=lambda e: (other[e] > row[box], -other[e]))
            for k, edge in enumerate(ends):
                ports[(*edge, box)] = TOP + row[box] * ROW + BOX_H * (k + 1) / (len(ends) + 1)
    return ports


def _arc(a: str, b: str, y0: float, y1: float) -> str:
    """One import as a curve from ``a``'s box to ``b``'s, right of the boxes when ``b`` is
    further down the list, left when further up; the longer, the wider."""
    span = abs(GROUPS.index(b) - GROUPS.index(a))
    bulge = 28 + 26 * span + 3 * GROUPS.index(a)
    x = BOX_X + BOX_W if GROUPS.index(b) > GROUPS.index(a) else BOX_X
    c = x + bulge if x > BOX_X else x - bulge
    colour = COLOURS[layer_of(a)][1]
    head = layer_of(a).replace(".", "-")
    return (
        f'<path d="M{x},{y0:.1f} C{c},{y0:.1f} {c},{y1:.1f} {x},{y1:.1f}" fill="none" '
        f'stroke="{colour}" stroke-width="1.5" marker-end="url(#head-{head})"/>'
    )


def _bands() -> list[str]:
    """A shaded band and a name for each layer, behind its groups' boxes."""
    shapes = []
    for layer in COLOURS:
        rows = [i for i, g in enumerate(GROUPS) if layer_of(g) == layer]
        top = TOP + rows[0] * ROW - 10
        height = (rows[-1] - rows[0]) * ROW + BOX_H + 20
        shapes += [
            f'<rect x="4" y="{top}" width="{WIDTH - 8}" height="{height}" rx="6" '
            f'fill="{COLOURS[layer][0]}" fill-opacity="0.45"/>',
            f'<text x="12" y="{top + 18}" font-size="12" fill="#555">{LAYER_NAMES[layer]}</text>',
        ]
    return shapes


def _boxes() -> list[str]:
    shapes = []
    for i, group in enumerate(GROUPS):
        fill, line = COLOURS[layer_of(group)]
        y = TOP + i * ROW
        shapes += [
            f'<rect x="{BOX_X}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="5" fill="{fill}" '
            f'stroke="{line}" stroke-width="1.5"/>',
            f'<text x="{BOX_X + BOX_W / 2:.0f}" y="{y + BOX_H / 2 + 5:.0f}" text-anchor="middle" '
            f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" '
            f'font-size="14">{group}</text>',
        ]
    return shapes


def picture() -> str:
    """The text of docs/img/architecture.svg: the groups of modules as boxes, each import
    between two groups as an arrow."""
    edges = group_edges()
    ports = _ports(edges)
    heads = [
        f'<marker id="head-{layer.replace(".", "-")}" viewBox="0 0 10 10" refX="9" refY="5" '
        f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{COLOURS[layer][1]}"/></marker>'
        for layer in COLOURS
    ]
    height = TOP * 2 + (len(GROUPS) - 1) * ROW + BOX_H
    lines = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        "<title>fedimb: who imports whom</title>",
        "<defs>",
        *heads,
        "</defs>",
        *_bands(),
        *_boxes(),
        *[_arc(a, b, ports[(a, b, a)], ports[(a, b, b)]) for a, b in edges],
        "</svg>",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(document())
    PICTURE.parent.mkdir(exist_ok=True)
    PICTURE.write_text(picture())
    print(DOC, PICTURE, file=sys.stderr)

"""fedimb's structure read from its own imports: every module's layer, the imports it
makes at run time, and the package picture in ``docs/architecture.md``, which this
module writes (``python -m tests.imports``) and the tests hold against the code."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
#: lowest first; a module may import from its own layer and the layers below it
LAYERS = ("fedimb.core", "fedimb.app", "methods", "fedimb.cli")
#: the boxes of the picture: the layers, with the method and core packages apart
GROUPS = ("fedimb.cli", "strategies", "clients", "fedimb.app", "fedimb.core", "fedimb.core.data", "fedimb.core.models")


def layer_of(module: str) -> str | None:
    if module.startswith(("strategies", "clients")):
        return "methods"
    if module in ("fedimb", "fedimb.__main__"):
        return "fedimb.cli"
    return next((layer for layer in LAYERS if module == layer or module.startswith(layer + ".")), None)


def group_of(module: str) -> str:
    if module in ("fedimb", "fedimb.__main__"):
        return "fedimb.cli"
    return max((g for g in GROUPS if module == g or module.startswith(g + ".")), key=len)


def modules() -> dict[str, Path]:
    """Every module of the package and the method folders, by dotted name."""
    found = {}
    for root in ("fedimb", "strategies", "clients"):
        for path in sorted((REPO / root).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def static_imports(path: Path) -> set[str]:
    """The project modules ``path`` imports at run time (``if TYPE_CHECKING:`` blocks and
    names loaded from a configuration's ``_target_`` are not imports)."""
    tree = ast.parse(path.read_text())
    skipped = {id(node) for block in ast.walk(tree)
               if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
               for node in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    known = modules()
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
    node = {g: g.replace(".", "_") for g in GROUPS}
    lines = [
        "# Architecture",
        "",
        "<!-- written by `python -m tests.imports` from the code's imports; "
        "tests/unit/test_architecture.py fails when it is out of date -->",
        "",
        "fedimb is three layers that import only downwards, with the methods as plug-ins between",
        "the Flower adapters and the front end:",
        "",
        "- **`fedimb/core/`**: the math and the data: aggregation rules, losses, the training loop,",
        "  models with an encoder/head split, data sets and partitioners, dropout, the payload and",
        "  instruction protocol. No Flower runtime, no Hydra, no processes.",
        "- **`fedimb/app/`**: the Flower adapters: ServerApp and ClientApp, the one round loop",
        "  (every runtime and every test runs rounds through `FedImbServer.run_round`), the client",
        "  registry, checkpoints, and the configuration (compose, validate, carry inside a run).",
        "- **`strategies/` and `clients/`**: one module per method, each half subclassing its base",
        "  (`strategies.base`, `clients.base`); the app loads them by the `_target_` of the method's",
        "  YAML and never imports them. A strategy imports no client and no other strategy.",
        "- **`fedimb/cli/`**: the `fedimb` command: Hydra front end, Flower processes, run folder,",
        "  report, diagnose, certificates.",
        "",
        "An arrow reads \"imports from\":",
        "",
        "```mermaid",
        "flowchart TD",
        *[f"    {node[g]}[\"{g}\"]" for g in GROUPS],
        *[f"    {node[a]} --> {node[b]}" for a, b in group_edges()],
        "```",
        "",
        "## Modules",
        "",
        "| module | layer | what it is for |",
        "|---|---|---|",
    ]
    for module, path in modules().items():
        if path.name == "__init__.py" and not first_line(path):
            continue
        lines.append(f"| `{path.relative_to(REPO)}` | {layer_of(module)} | {first_line(path).replace('|', '/')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(document())
    print(DOC, file=sys.stderr)

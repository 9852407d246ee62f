"""The package's layers import only downwards, methods stay apart, and every method
setting has one source (its YAML)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest
import yaml

from fedimb.app.configuration.components import import_class
from fedimb.app.configuration.compose import CONF_DIR, declared_keys
from fedimb.core import protocol
from tests.config_reads import literal_fallbacks
from tests.generated import keep_current
from tests.imports import (
    DOC,
    FOLDERS,
    LAYERS,
    PACKAGE_ROOTS,
    REPO,
    TOOL_ROOTS,
    document,
    first_line,
    layer_of,
    misplaced,
    modules,
    static_imports,
)

IMPORTS = {module: static_imports(path) for module, path in modules().items()}
DECLARED = declared_keys()
EVERY_MODULE = modules(PACKAGE_ROOTS + TOOL_ROOTS)
#: the package, the methods, the benchmarks and the edge tooling, each module's imports
ALL_IMPORTS = {m: static_imports(path, EVERY_MODULE) for m, path in EVERY_MODULE.items()}


def test_every_module_has_a_layer():
    assert [m for m in ALL_IMPORTS if layer_of(m) is None] == []


def test_every_module_lives_in_the_folder_of_its_job():
    assert misplaced(modules()) == [], "modules outside the folders of tests.imports.FOLDERS"


def test_a_module_in_a_bare_or_unknown_folder_is_misplaced(tmp_path):
    found = {
        "fedimb.cli.main": tmp_path / "main.py",  # the entry point, listed
        "fedimb.cli.report": tmp_path / "report.py",  # flat again in the front end's root
        "fedimb.app.round_loop": tmp_path / "round_loop.py",  # flat in the app's root
        "fedimb.cli.misc.helpers": tmp_path / "helpers.py",  # a folder without a job
        "fedimb.cli.results.report": tmp_path / "report.py",
    }
    assert misplaced(found) == [
        "fedimb.cli.report",
        "fedimb.app.round_loop",
        "fedimb.cli.misc.helpers",
    ]


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_imports_run_only_downwards(module):
    rank = LAYERS.index(layer_of(module))
    upward = sorted(m for m in IMPORTS[module] if layer_of(m) and LAYERS.index(layer_of(m)) > rank)
    assert upward == [], f"{module} imports from a higher layer"


def _may_import(module: str, imported: str) -> bool:
    """A method module imports its own half's base, and a strategy also the client module
    of its own name (where the method's keys and payloads are declared); nothing else of
    ``strategies`` or ``clients``."""
    own, name = module.split(".")[0], module.split(".")[1]
    if imported.startswith(own + ".base") or imported == own:
        return True
    return own == "strategies" and imported in (f"clients.{name}", "clients.base", "clients")


@pytest.mark.parametrize(
    "module", sorted(m for m in IMPORTS if m.startswith(("strategies.", "clients.")))
)
def test_methods_import_no_other_method(module):
    wrong = sorted(
        m
        for m in IMPORTS[module]
        if m.startswith(("strategies", "clients")) and not _may_import(module, m)
    )
    assert wrong == [], f"{module} imports another method's module"


def _import_cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of modules (Tarjan); an import of a package from one of its
    own modules is not an edge (the package's ``__init__`` re-exports them)."""
    graph = {
        m: sorted(i for i in imports[m] if i != m and not m.startswith(i + ".")) for m in imports
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, []):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_circles():
    assert _import_cycles(ALL_IMPORTS) == [], "modules that import each other in a circle"


def test_a_circle_through_a_type_checking_import_or_in_a_tool_is_found(tmp_path):
    (tmp_path / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from benchmarks.b import B\n"
    )
    (tmp_path / "b.py").write_text("def f():\n    from benchmarks.a import A\n")
    known = {"benchmarks.a": tmp_path / "a.py", "benchmarks.b": tmp_path / "b.py"}
    imports = {m: static_imports(path, known) for m, path in known.items()}
    assert _import_cycles(imports) == [["benchmarks.a", "benchmarks.b"]]


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_configuration_is_read_without_a_fallback_of_its_own(module):
    found = literal_fallbacks(modules()[module], DECLARED)
    assert found == [], "defaults belong in conf/ (older configurations: upgrade.py)"


def test_a_configuration_read_with_a_literal_fallback_is_found(tmp_path):
    source = tmp_path / "reader.py"
    source.write_text(
        "def f(cfg, event, runtime):\n"
        "    a = cfg.dropout.get('p', 1.0)\n"  # a fallback that disagrees with the YAML
        "    b = getattr(runtime, 'wait_for_nodes', 120)\n"
        "    c = OmegaConf.select(cfg, 'validation.fraction', default=0.0)\n"
        "    d = cfg.get('sampling')\n"  # no fallback: fine
        "    e = event.get('seconds', 0.0)\n"  # an event, not the configuration
        "    return a, b, c, d, e\n"
    )
    found = [line.split(": ", 1)[1] for line in literal_fallbacks(source, DECLARED)]
    assert found == [
        "cfg.dropout.get('p', 1.0)",
        "getattr(runtime, 'wait_for_nodes', 120)",
        "OmegaConf.select(cfg, 'validation.fraction', default=0.0)",
    ]


SOURCE_LIMIT = 300


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_modules_stay_small(module):
    lines = len(modules()[module].read_text().splitlines())
    assert lines <= SOURCE_LIMIT, (
        f"{module} has {lines} lines (at most {SOURCE_LIMIT}): split it by job"
    )


METHOD_FILES = sorted((CONF_DIR / "method").glob("*.yaml"))


@pytest.mark.parametrize("path", METHOD_FILES, ids=[p.stem for p in METHOD_FILES])
def test_strategy_settings_are_declared_as_client_settings_are(path):
    """A strategy's settings are its ``Settings`` dataclass, read from its YAML only: its
    constructor takes the run alone, and no field has a default to drift from the YAML."""
    data = yaml.safe_load(path.read_text()) or {}
    for half in ("strategy", "client"):
        target = (data.get(half) or {}).get("_target_")
        if target is None:  # a variant that inherits its method's classes
            continue
        cls = import_class(target)
        declared = getattr(cls, "Settings", None)
        if declared is None:
            continue
        with_defaults = [
            f.name
            for f in dataclasses.fields(declared)
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        ]
        assert with_defaults == [], (
            f"{target} has defaults for {with_defaults}: {path.name} holds them"
        )
        assert {f.name for f in dataclasses.fields(declared)} == set(data[half]) - {"_target_"}
    strategy = (data.get("strategy") or {}).get("_target_")
    if strategy is not None:
        parameters = inspect.signature(import_class(strategy).__init__).parameters
        assert list(parameters) == ["self", "run"], f"{strategy} takes its settings as Settings"


def test_the_architecture_document_is_the_codes():
    """docs/architecture.md lists every folder with its job and every module with its
    docstring's first paragraph (rewritten here where out of date: tests.generated)."""
    text = document()
    keep_current(DOC, text)
    assert all(f"| `{name.replace('.', '/')}/` |" in text for name in FOLDERS)
    documented = {m for m, p in modules().items() if first_line(p) or p.name != "__init__.py"}
    assert all(f"| `{modules()[m].relative_to(REPO)}` |" in text for m in documented)


def _method_yaml(path):
    return yaml.safe_load(path.read_text()) or {}


def _is_variant(data: dict) -> bool:
    """A variant (``astraea_aug``) composes another method's YAML and names no class."""
    return bool(data.get("defaults")) and not any(
        isinstance(data.get(half), dict) and "_target_" in data[half]
        for half in ("strategy", "client")
    )


METHODS = [p for p in METHOD_FILES if not _is_variant(_method_yaml(p))]


@pytest.mark.parametrize("path", METHODS, ids=[p.stem for p in METHODS])
def test_a_method_is_found_by_its_name(path):
    """``ls clients strategies`` shows every method: each class its YAML names lives in
    the module of the method's name (a client-only method may leave its strategy out)."""
    data = _method_yaml(path)
    name = path.stem
    assert f"clients.{name}" in IMPORTS, f"method {name} has no clients/{name}.py"
    for half in ("strategy", "client"):
        target = (data.get(half) or {}).get("_target_")
        if target is None:
            assert half == "strategy", f"{path.name} names no client class"
            continue
        module = target.rsplit(".", 1)[0]
        expected = f"{'strategies' if half == 'strategy' else 'clients'}.{name}"
        assert module == expected, f"{path.name}: {half} {target} is not in {expected}"


def _literals(path) -> set[str]:
    """The key-like string literals of a module, docstrings and attribute names left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and ast.get_docstring(node, clean=False) is not None
    }
    # attribute names (the strategy state a checkpoint keeps) are names, not keys
    docstrings |= {
        id(constant)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(getattr(t, "id", None) == "checkpoint_attributes" for t in node.targets)
        for constant in ast.walk(node.value)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and KEY_LIKE.fullmatch(node.value)
    }


KEY_LIKE = re.compile(r"[a-z][a-z0-9_]{2,}[._]?")
METHOD_MODULES = {m: p for m, p in modules().items() if m.startswith(("strategies", "clients"))}
LITERALS = {m: _literals(p) for m, p in METHOD_MODULES.items()}
PROTOCOL_KEYS = {
    node.value.value
    for node in ast.parse(Path(protocol.__file__).read_text()).body
    if isinstance(node, ast.Assign)
    and isinstance(node.value, ast.Constant)
    and isinstance(node.value.value, str)
}


@pytest.mark.parametrize("module", sorted(METHOD_MODULES))
def test_protocol_keys_are_named_not_written(module):
    """A key the protocol defines is used through its constant, never retyped."""
    retyped = sorted(LITERALS[module] & PROTOCOL_KEYS)
    assert retyped == [], f"{module} writes protocol keys as literals: use fedimb.core.protocol"


def test_no_key_is_written_in_both_halves():
    """An instruction or payload key both halves use is defined once, in the method's client
    module or in the protocol, and imported by the other half."""
    server = set().union(*(v for m, v in LITERALS.items() if m.startswith("strategies")))
    client = set().union(*(v for m, v in LITERALS.items() if m.startswith("clients")))
    assert sorted(server & client) == []

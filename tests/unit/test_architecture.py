"""The package's layers import only downwards, methods stay apart, and every method
setting has one source (its YAML)."""

from __future__ import annotations

import inspect

import pytest
import yaml

from fedimb.app.components import import_class
from fedimb.app.config import CONF_DIR
from tests.imports import DOC, LAYERS, document, layer_of, modules, static_imports

IMPORTS = {module: static_imports(path) for module, path in modules().items()}


def test_every_module_has_a_layer():
    assert [m for m in IMPORTS if layer_of(m) is None] == []


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_imports_run_only_downwards(module):
    rank = LAYERS.index(layer_of(module))
    upward = sorted(m for m in IMPORTS[module] if layer_of(m) and LAYERS.index(layer_of(m)) > rank)
    assert upward == [], f"{module} imports from a higher layer"


@pytest.mark.parametrize(
    "module", sorted(m for m in IMPORTS if m.startswith(("strategies.", "clients.")))
)
def test_methods_import_no_other_method(module):
    own = module.split(".")[0]
    other = {"strategies": "clients", "clients": "strategies"}[own]
    wrong = sorted(
        m
        for m in IMPORTS[module]
        if m.startswith(other) or (m.startswith(own + ".") and not m.startswith(own + ".base"))
    )
    assert wrong == [], f"{module} imports another method's module"


METHOD_FILES = sorted((CONF_DIR / "method").glob("*.yaml"))


@pytest.mark.parametrize("path", METHOD_FILES, ids=[p.stem for p in METHOD_FILES])
def test_strategy_signatures_hold_no_defaults(path):
    """A strategy's settings come from its YAML only: no keyword default to drift from it."""
    target = (yaml.safe_load(path.read_text()) or {}).get("strategy", {}).get("_target_")
    if target is None:  # a variant that inherits its method's strategy
        return
    parameters = inspect.signature(import_class(target).__init__).parameters.values()
    with_defaults = [p.name for p in parameters if p.default is not inspect.Parameter.empty]
    assert with_defaults == [], (
        f"{target} has defaults for {with_defaults}; they belong in {path.name}"
    )


def test_the_architecture_document_matches_the_code():
    assert DOC.read_text() == document(), (
        "docs/architecture.md is out of date: run python -m tests.imports"
    )

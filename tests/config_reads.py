"""Reads of the configuration that carry their own default: ``cfg.get("key", 0.5)``,
``getattr(runtime, "key", 0.5)``, ``OmegaConf.select(cfg, "a.key", default=0.5)``.

A default belongs in ``conf/`` only (an older run folder's configuration is brought up to
date by :mod:`fedimb.app.configuration.upgrade`), so the architecture test finds these
reads: a key that ``conf/`` declares, read from a configuration node (a name that holds
one: ``cfg``, a section, a group's node) with a literal to fall back on (a number, text,
a truth value, an empty container, a constant)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

#: names that hold the configuration or one of its nodes in fedimb's code
CONFIG_NAMES = frozenset(
    {
        "cfg",
        "config",
        "run_config",
        "section",
        "spec",
        "node",
        "runtime",
        "r",
        "evaluation",
        "dropout",
        "tracking",
        "method",
        "norm",
        "aggregation",
        "privacy",
        "influence",
        "partition",
        "validation",
        "train",
    }
)


def is_literal(node: ast.expr) -> bool:
    """A value written in the code: a constant other than None, an empty or constant
    container, a negative number, or an UPPER_CASE name."""
    if isinstance(node, ast.Constant):
        return node.value is not None
    if isinstance(node, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
        values = node.values if isinstance(node, ast.Dict) else node.elts
        return all(isinstance(v, ast.Constant) for v in values)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.Name):
        return node.id.isupper()
    return False


def reads_configuration(receiver: ast.expr) -> bool:
    """Whether ``receiver`` is the configuration or one of its nodes, by the names in it."""
    names = {n.id for n in ast.walk(receiver) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(receiver) if isinstance(n, ast.Attribute)}
    return bool(names & CONFIG_NAMES)


def _read(node: ast.AST) -> tuple[ast.expr, ast.expr, ast.expr] | None:
    """(receiver, key, fallback) of a ``.get``, ``getattr`` or ``OmegaConf.select`` call."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "get" and len(node.args) == 2:
        return func.value, node.args[0], node.args[1]
    if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) == 3:
        return node.args[0], node.args[1], node.args[2]
    if isinstance(func, ast.Attribute) and func.attr == "select" and len(node.args) >= 2:
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        if default is not None:
            return node.args[0], node.args[1], default
    return None


def literal_fallbacks(path: Path, keys: Iterable[str]) -> list[str]:
    """``file:line: code`` of every configuration read in ``path`` that falls back on a
    literal, for the declared ``keys`` (dotted, as :func:`declared_keys` gives them)."""
    leaves = {key.rpartition(".")[2] for key in keys} | set(keys)
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        read = _read(node)
        if read is None:
            continue
        receiver, key, fallback = read
        if (
            isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and key.value in leaves
            and is_literal(fallback)
            and reads_configuration(receiver)
        ):
            found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found

# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The import structure, checked (part of `make lint`): no cycles between modules, hidden or not
(imports inside functions and under TYPE_CHECKING count), and no import against the layers.

    python scripts/check_imports.py [--graph]

Layers, lowest first: a module may import its own layer's and lower layers' modules only. Within
the library (prorl_gym/), a subpackage or top-level module is one unit of LAYERS; the servers
(resources_servers/, responses_api_*/) sit above the whole library, and an environment's folder
imports no other environment's.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "prorl_gym",
    "resources_servers",
    "responses_api_agents",
    "responses_api_models",
    "environment_servers",
    "benchmarks",
)
SKIP_PARTS = {"tests", "__pycache__", "data", "guard"}  # tests; data scripts; code that runs inside sandboxes

# Units of the library, lowest layer first; units on one line are one layer (neither imports the other).
LAYERS = [
    ["prorl_gym.server_zygote"],
    ["prorl_gym.config"],
    [
        "prorl_gym.errors",
        "prorl_gym.paths",
        "prorl_gym.jsonl",
        "prorl_gym.lifespan",
        "prorl_gym.supervise",
        "prorl_gym.prometheus",
        "prorl_gym.scripted",
        "prorl_gym.ray_head",
        "prorl_gym.tracing",
        "prorl_gym.interrupts",
    ],
    ["prorl_gym.asgi", "prorl_gym.wire", "prorl_gym.preflight", "prorl_gym.disconnect"],
    ["prorl_gym.runtime", "prorl_gym.tokens", "prorl_gym.local_models"],
    ["prorl_gym.sandbox"],
    ["prorl_gym.verify"],
    ["prorl_gym.resources", "prorl_gym.pipeline", "prorl_gym.client", "prorl_gym.watch"],
    ["prorl_gym.jobs", "prorl_gym.capture"],
    ["prorl_gym.dashboard"],
    ["prorl_gym.environments"],
    ["prorl_gym.stack"],
    ["prorl_gym.testing"],
    ["prorl_gym.evaluation", "prorl_gym.serve", "prorl_gym.demo", "prorl_gym.example_rollouts"],
    ["resources_servers", "responses_api_agents", "responses_api_models", "environment_servers"],
    ["benchmarks"],
]


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if SKIP_PARTS & set(rel.parts[:-1]):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Our modules that `name` imports, anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in known:
                candidate = candidate.rpartition(".")[0]
            if candidate and candidate != name:
                targets.add(candidate)
                break
    return targets


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_of(module: str) -> tuple[int, str] | None:
    for level, units in enumerate(LAYERS):
        for unit in units:
            if module == unit or module.startswith(unit + "."):
                return level, unit
    return None


def environment_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "resources_servers" and len(parts) > 1 else None


def against_layers(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in sorted(graph.items()):
        mine = layer_of(module)
        for target in sorted(targets):
            theirs = layer_of(target)
            if mine is None or theirs is None:
                wrong.append(f"{module} -> {target}: a module in no layer (add it to LAYERS)")
            elif theirs[0] > mine[0] or (theirs[0] == mine[0] and theirs[1] != mine[1]):
                wrong.append(f"{module} -> {target}: {mine[1]} may not import {theirs[1]}")
            elif (
                environment_of(module) and environment_of(target) and environment_of(module) != environment_of(target)
            ):
                wrong.append(f"{module} -> {target}: an environment imports another environment's module")
    return wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", action="store_true", help="print every module's imports")
    args = parser.parse_args()
    known = modules()
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    if args.graph:
        for name, targets in sorted(graph.items()):
            print(name, "->", ", ".join(sorted(targets)))
    problems = [f"cycle: {' <-> '.join(c)}" for c in cycles(graph)] + against_layers(graph)
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"imports: {len(known)} modules, {sum(map(len, graph.values()))} imports, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

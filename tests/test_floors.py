"""Imports run one way, from the edges to the core (../shared/DESIGN.md, "the floors"): a module
never imports one of a floor nearer the edges, at its top or inside a function. Type hints of a
floor above are imported under ``TYPE_CHECKING`` only, which never runs."""

import ast
from pathlib import Path

import tunebench

PACKAGE = Path(tunebench.__file__).parent

#: Each module (a sub-package counts as one) on its floor, 1 the edges, 5 the foundations.
FLOORS = {
    1: ["plugin", "cli", "items", "progress"],  # entry points and the terminal
    2: ["session", "gate", "final_round", "compile_check"],  # orchestration
    # measurement; replay answers the workers' jobs in their place, from a recorded space
    3: ["measure", "workers", "prepared", "compare", "cluster", "builds", "interference", "replay"],
    4: ["strategies", "report", "summary", "lookup", "apply", "export", "kernel", "c_constraint", "benchmark_json"],
    5: ["backends", "records", "records_merge", "space", "buckets", "device", "stats", "dtypes", "user_code",
        "owned", "ported", "stamps", "comments"],  # foundations
}
FLOOR_OF = {module: floor for floor, modules in FLOORS.items() for module in modules}


def module_of(path: Path) -> str:
    """The floor's name of a file: its module, or the sub-package it is in."""
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def imported(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, tunebench module) of every import that runs, at the top or in a function."""
    hidden = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
              for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tunebench":
            names = [f"tunebench.{a.name}" for a in node.names] if node.module == "tunebench" else [node.module]
            found += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "tunebench"]
    return found


def test_every_module_has_a_floor():
    modules = {module_of(p) for p in PACKAGE.rglob("*.py")} - {"__init__"}
    assert modules - set(FLOOR_OF) == set(), "put each new module on its floor in FLOORS"


def test_no_module_imports_one_nearer_the_edges():
    upward = []
    for path in PACKAGE.rglob("*.py"):
        here = module_of(path)
        if here == "__init__":  # the package's facade re-exports the public API
            continue
        for line, name in imported(ast.parse(path.read_text())):
            there = name.split(".")[1]
            if there in FLOOR_OF and FLOOR_OF[there] < FLOOR_OF[here]:
                upward.append(f"{path.relative_to(PACKAGE)}:{line}: {here} (floor {FLOOR_OF[here]}) imports {name} "
                              f"(floor {FLOOR_OF[there]})")
    assert upward == []

"""The architecture is a test: every import in src/memstrata must respect the layers of docs/architecture.md.

Each module is parsed with ``ast`` (nothing is imported, so this stays fast), and every import that names a
memstrata module becomes an edge, tagged by where it sits:

- ``top``: runs when the module is imported;
- ``function``: inside a ``def``; runs on the first call. Still a runtime dependency, and the usual way a cycle is
  hidden rather than removed, so it counts as a cycle edge too;
- ``typing``: under ``if TYPE_CHECKING:``; never runs, so it cannot make a runtime cycle, but it is still a
  dependency: the layer rules count it, and a cycle it closes is reported as a type-only cycle.

Imports by string (the "module:attribute" targets ``memstrata.registry`` imports when a backend is chosen) are not
seen; they point from the core up to the adapters on purpose, so an optional dependency loads only when chosen.
Importing ``memstrata.a.b`` also runs ``memstrata/a/__init__.py``; only the written import is an edge.

The breaks that exist today are listed in KNOWN_VIOLATIONS, so the suite passes. The list is a ratchet: a new break
fails, and so does an entry whose import is gone (delete it). Entries are removed by the redesign, never added to
make a test pass.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import pytest

PACKAGE = "memstrata"
SOURCE = Path(__file__).resolve().parents[1] / "src" / PACKAGE

Kind = Literal["top", "function", "typing"]
Rule = Literal["upward", "adapter", "front", "cycle", "type-cycle"]
Edge = tuple[str, str]

#: The layers, highest first; each lists its units (a unit is a name directly under memstrata/: a module or a
#: subpackage; ``__init__`` is the package itself, the public API). A module imports its own layer or lower ones.
LAYERS: dict[str, frozenset[str]] = {
    # What users run. `terminal` is the fronts' shared helper for printing untrusted text; `integrations` adapt
    # Memory to agent frameworks.
    "front": frozenset({"__main__", "cli", "server", "mcp", "agent", "bench", "terminal", "integrations"}),
    # The Memory facade: `memstrata/__init__.py` (the public API), memory.py and the collaborators it holds.
    "facade": frozenset({"__init__", "memory", "facade"}),
    # The memory logic the facade composes.
    "domain": frozenset({"tiers", "retrieval", "extraction"}),
    # Backends and providers behind narrow protocols; they never import each other.
    "adapter": frozenset({"storage", "embeddings", "llms"}),
    # What remote providers share (token usage, the cost log, the retrying HTTP client), so adapters need not.
    "shared": frozenset({"remote"}),
    # Values, errors, settings and pure helpers with no I/O beyond reading settings and bundled data; `registry`
    # names the backends and providers by string and imports them only when one is chosen.
    # `transfer` is the JSONL export format: public vocabulary, like models.
    "core": frozenset(
        {
            "models",
            "errors",
            "config",
            "ids",
            "validation",
            "version",
            "prices",
            "policies",
            "prompts",
            "registry",
            "transfer",
        }
    ),
}
#: 0 for the core, one more per layer up.
RANK: dict[str, int] = {layer: rank for rank, layer in enumerate(reversed(list(LAYERS)))}

#: What any front may import besides its own unit: the facade's public face (the package itself and Memory), the
#: public vocabulary (models, errors, config, the export format), the pure input rules every front must apply
#: alike (validation, ids) and the fronts' helper (terminal). Anything else a front needs belongs on Memory or in
#: models.
FRONT_MAY_IMPORT = frozenset(
    {"__init__", "memory", "models", "errors", "config", "validation", "ids", "terminal", "transfer"}
)
#: Fronts that start other fronts: `python -m memstrata` runs the CLI; the CLI serves, runs MCP, chats, benchmarks.
FRONT_LAUNCHES: dict[str, frozenset[str]] = {
    "__main__": frozenset({"cli"}),
    "cli": frozenset({"server", "mcp", "agent", "bench"}),
}
#: Fronts that measure components below the facade. A benchmark of the whole system goes through Memory; the
#: component benchmarks (the entity extractor's precision, a segmentation sweep, the plain BM25 and dense baselines,
#: embedder speed) and the datasets' preparation (dates read as the extractor reads them, the prompts the answering
#: model gets) call the domain and the embedders directly, read-only.
FRONT_MEASURES: dict[str, frozenset[str]] = {
    "bench": frozenset({"retrieval", "extraction", "tiers", "prompts", "embeddings"}),
}

#: Every break of a rule that exists today: rule → {"importer -> imported": why it is there / how it goes away}.
#: Only ever delete entries. For the two cycle rules an entry is the edge the redesign will cut.
KNOWN_VIOLATIONS: dict[Rule, dict[str, str]] = {
    "upward": {},
    "adapter": {},
    "front": {},
    "cycle": {},
    "type-cycle": {},
}

HOW_TO_FIX: dict[Rule, str] = {
    "upward": "a module imports only its own layer or lower ones (front > facade > domain > adapter > core); "
    "move the shared piece down, or let the higher layer pass it in",
    "adapter": "adapters (storage, embeddings, llms) import only their own package and the core, and a backend "
    "(storage/sqlite, ...) only its own files and its package's shared modules; share code through the core",
    "front": "a front imports its own package, memstrata/Memory, models, errors, config, validation, ids, transfer and "
    "terminal (the CLI may also start the other fronts); put what it needs on Memory or in models",
    "cycle": "move what both sides need into a lower module, or depend on a Protocol; moving an import into a "
    "function hides a cycle, it does not remove it",
    "type-cycle": "the modules only make sense together even though they import fine; depend on a Protocol in a "
    "lower module instead of the concrete class",
}


@dataclass(frozen=True, slots=True)
class Import:
    """One import of a memstrata module by another: the first, most runtime-like one of that pair."""

    importer: str
    imported: str
    line: int
    kind: Kind
    path: str = ""

    @property
    def edge(self) -> str:
        """The allowlist spelling: ``"importer -> imported"``."""
        return f"{self.importer} -> {self.imported}"

    @property
    def where(self) -> str:
        """``path:line``, with the kind of import."""
        kind = {"top": "top-level", "function": "function-level", "typing": "TYPE_CHECKING"}[self.kind]
        return f"{self.path or self.importer}:{self.line}, {kind}"


@dataclass(frozen=True, slots=True)
class Project:
    """The modules of a package and the imports between them."""

    modules: frozenset[str]
    imports: Mapping[Edge, Import]

    @property
    def packages(self) -> frozenset[str]:
        """Every module that has modules under it."""
        return frozenset(
            ".".join(name.split(".")[:cut]) for name in self.modules for cut in range(1, name.count(".") + 1)
        )


KIND_ORDER: dict[Kind, int] = {"top": 0, "function": 1, "typing": 2}


def project_of(modules: Iterable[str], imports: Iterable[Import]) -> Project:
    """Keep one import per pair of modules: the most runtime-like, then the first."""
    kept: dict[Edge, Import] = {}
    for found in imports:
        edge = (found.importer, found.imported)
        if found.importer == found.imported:
            continue
        if edge not in kept or (KIND_ORDER[found.kind], found.line) < (KIND_ORDER[kept[edge].kind], kept[edge].line):
            kept[edge] = found
    return Project(frozenset(modules), kept)


class _ImportCollector(ast.NodeVisitor):
    """Collects one module's imports of ``package`` modules, tagged top / function / typing."""

    def __init__(self, module: str, is_package: bool, known: frozenset[str], path: str) -> None:
        self.module = module
        self.is_package = is_package
        self.known = known
        self.path = path
        self.function_depth = 0
        self.typing_depth = 0
        self.found: list[Import] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._inside_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._inside_function(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._inside_function(node)

    def _inside_function(self, node: ast.AST) -> None:
        self.function_depth += 1
        self.generic_visit(node)
        self.function_depth -= 1

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if not (
            (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
        ):
            self.generic_visit(node)
            return
        self.visit(test)
        self.typing_depth += 1
        for statement in node.body:
            self.visit(statement)
        self.typing_depth -= 1
        for statement in node.orelse:
            self.visit(statement)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:  # relative: resolve against this module's package
            parts = self.module.split(".")
            base = parts if self.is_package else parts[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join([*base, node.module] if node.module else base)
        else:
            source = node.module or ""
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            self._add(submodule if submodule in self.known else source, node.lineno)

    def _add(self, name: str, line: int) -> None:
        while name and name not in self.known:  # `from memstrata.x import attribute` names the module memstrata.x
            name = name.rpartition(".")[0]
        if not name or name == self.module:
            return
        kind: Kind = "typing" if self.typing_depth else "function" if self.function_depth else "top"
        self.found.append(Import(self.module, name, line, kind, self.path))


def read_project(source: Path, package: str) -> Project:
    """Parse every module under ``source`` (the directory of ``package``) and collect its imports."""
    files: dict[str, tuple[Path, bool]] = {}
    for path in sorted(source.rglob("*.py")):
        parts = [package, *path.relative_to(source).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        files[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    known = frozenset(files)
    imports: list[Import] = []
    for module, (path, is_package) in files.items():
        shown = f"{source.parent.name}/{package}/{path.relative_to(source).as_posix()}"
        collector = _ImportCollector(module, is_package, known, shown)
        collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        imports.extend(collector.found)
    return project_of(known, imports)


def unit_of(module: str) -> str:
    """The name directly under the package (``memstrata.cli.common`` → ``cli``); ``__init__`` for the package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_of(module: str) -> str | None:
    """The layer a module's unit is placed in, or None for a module nobody has placed."""
    unit = unit_of(module)
    return next((layer for layer, units in LAYERS.items() if unit in units), None)


def adapter_part(module: str, packages: frozenset[str]) -> str:
    """``storage.sqlite`` for a module of a backend subpackage, else its unit (``storage`` for storage/base.py)."""
    parts = module.split(".")
    if len(parts) >= 3 and ".".join(parts[:3]) in packages:
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else "__init__"


def broken_rule(importer: str, imported: str, packages: frozenset[str]) -> Rule | None:
    """The layering rule an import breaks, if any (cycles are checked on the whole graph)."""
    importer_layer, imported_layer = layer_of(importer), layer_of(imported)
    if importer_layer is None or imported_layer is None:
        return None  # test_every_module_has_a_layer reports it
    importer_unit, imported_unit = unit_of(importer), unit_of(imported)
    if importer_layer == "front":
        allowed = (
            FRONT_MAY_IMPORT
            | FRONT_LAUNCHES.get(importer_unit, frozenset())
            | FRONT_MEASURES.get(importer_unit, frozenset())
            | {importer_unit}
        )
        return None if imported_unit in allowed else "front"
    if RANK[importer_layer] < RANK[imported_layer]:
        return "upward"
    if importer_layer == imported_layer == "adapter":
        if importer_unit != imported_unit:
            return "adapter"
        imported_part = adapter_part(imported, packages)
        if imported_part != imported_unit and imported_part != adapter_part(importer, packages):
            return "adapter"  # into a backend from outside it: a sibling backend or the package's shared modules
    return None


def layering_breaks(project: Project) -> dict[Rule, dict[str, Import]]:
    """Every import that breaks the upward, adapter or front rule, by rule."""
    breaks: dict[Rule, dict[str, Import]] = {"upward": {}, "adapter": {}, "front": {}}
    packages = project.packages
    for (importer, imported), found in sorted(project.imports.items()):
        rule = broken_rule(importer, imported, packages)
        if rule is not None:
            breaks[rule][found.edge] = found
    return breaks


def reachable(edges: Iterable[Edge], start: str) -> set[str]:
    """Every module ``start`` reaches by following edges (itself only if on a cycle)."""
    following: dict[str, list[str]] = {}
    for importer, imported in edges:
        following.setdefault(importer, []).append(imported)
    seen: set[str] = set()
    pending = list(following.get(start, []))
    while pending:
        module = pending.pop()
        if module not in seen:
            seen.add(module)
            pending.extend(following.get(module, []))
    return seen


def shortest_path(imports: Mapping[Edge, Import], start: str, goal: str) -> list[Import] | None:
    """The fewest imports leading from ``start`` to ``goal`` (at least one, so ``start == goal`` finds a cycle)."""
    following: dict[str, list[Import]] = {}
    for edge, found in sorted(imports.items()):
        following.setdefault(edge[0], []).append(found)
    came_from: dict[str, Import] = {}
    queue = deque([start])
    while queue and goal not in came_from:
        for found in following.get(queue.popleft(), []):
            if found.imported not in came_from:
                came_from[found.imported] = found
                queue.append(found.imported)
    if goal not in came_from:
        return None
    hops = [came_from[goal]]
    while hops[-1].importer != start:
        hops.append(came_from[hops[-1].importer])
    return hops[::-1]


def tangles(imports: Mapping[Edge, Import]) -> dict[str, frozenset[str]]:
    """For each module on a cycle, its tangle: the modules it reaches that reach it back (itself included)."""
    modules = sorted({module for edge in imports for module in edge})
    reach = {module: reachable(imports, module) for module in modules}
    return {
        module: frozenset(other for other in reach[module] if module in reach[other])
        for module in modules
        if module in reach[module]
    }


def find_cycles(imports: Mapping[Edge, Import]) -> list[list[Import]]:
    """One shortest cycle per tangle, as its imports in order."""
    cycles: list[list[Import]] = []
    placed: set[str] = set()
    for start, tangle in sorted(tangles(imports).items()):
        cycle = None if start in placed else shortest_path(imports, start, start)
        if cycle is not None:
            placed |= tangle
            cycles.append(cycle)
    return cycles


def find_type_cycles(imports: Mapping[Edge, Import]) -> list[tuple[list[Import], int]]:
    """Per tangle, the shortest cycle closed by a TYPE_CHECKING import, and how many such imports the tangle has."""
    closing: dict[frozenset[str], list[list[Import]]] = {}
    tangle_of = tangles(imports)
    for found in sorted(imports.values(), key=lambda found: found.edge):
        way_back = shortest_path(imports, found.imported, found.importer) if found.kind == "typing" else None
        if way_back is not None:
            closing.setdefault(tangle_of[found.importer], []).append([found, *way_back])
    return [(min(cycles, key=len), len(cycles)) for cycles in closing.values()]


def describe_break(rule: Rule, found: Import) -> str:
    """Which import, which rule, what to do."""
    layers = f"{layer_of(found.importer)} -> {layer_of(found.imported)}"
    return (
        f"{found.importer} imports {found.imported} ({found.where}; {layers}) breaks the {rule!r} rule: "
        f"{HOW_TO_FIX[rule]}."
    )


def describe_cycle(rule: Rule, cycle: list[Import], note: str = "") -> str:
    """The cycle hop by hop, with what to do."""
    path = " -> ".join(f"{hop.importer} ({hop.where})" for hop in cycle)
    return f"{rule} {path} -> {cycle[0].importer}{note}: {HOW_TO_FIX[rule]}."


def stale_entry(rule: Rule, edge: str) -> str:
    """The ratchet's message."""
    return (
        f"KNOWN_VIOLATIONS[{rule!r}] lists {edge!r}, but that import is gone or no longer breaks the rule: "
        "delete the entry (the list only shrinks)."
    )


def ratchet(rule: Rule, found: Mapping[str, Import], known: Mapping[str, str]) -> list[str]:
    """New breaks and stale allowlist entries of one layering rule."""
    problems = [describe_break(rule, found[edge]) for edge in sorted(found.keys() - known.keys())]
    return problems + [stale_entry(rule, edge) for edge in sorted(known.keys() - found.keys())]


def cycle_problems(
    project: Project, rule: Literal["cycle", "type-cycle"], known: Mapping[Rule, Mapping[str, str]]
) -> list[str]:
    """New cycles, and allowlisted cycle edges that no longer close one.

    ``cycle`` looks at runtime edges (top and function level) minus the known cycle edges and reports one cycle per
    tangle; ``type-cycle`` looks at every edge minus both lists and reports, per tangle, the shortest cycle a
    TYPE_CHECKING import closes (cycles without one are runtime cycles, reported by the other rule).
    """
    if rule == "cycle":
        graph = {edge: found for edge, found in project.imports.items() if found.kind != "typing"}
        cut = set(known.get("cycle", {}))
    else:
        graph = dict(project.imports)
        cut = set(known.get("cycle", {})) | set(known.get("type-cycle", {}))
    problems: list[str] = []
    for edge in sorted(known.get(rule, {})):
        importer, _, imported = edge.partition(" -> ")
        if (importer, imported) not in graph or importer not in reachable(graph, imported):
            problems.append(stale_entry(rule, edge))
    remaining = {edge: found for edge, found in graph.items() if found.edge not in cut}
    if rule == "cycle":
        return problems + [describe_cycle(rule, cycle) for cycle in find_cycles(remaining)]
    for cycle, count in find_type_cycles(remaining):
        others = f" (and {count - 1} more TYPE_CHECKING imports close cycles among these modules)" if count > 1 else ""
        problems.append(describe_cycle(rule, cycle, others))
    return problems


# The real tree.


@pytest.fixture(scope="module")
def project() -> Project:
    return read_project(SOURCE, PACKAGE)


def test_the_tree_was_found(project: Project) -> None:
    assert {"memstrata", "memstrata.memory", "memstrata.models", "memstrata.storage.base"} <= project.modules
    assert ("memstrata", "memstrata.memory") in project.imports


def test_every_module_has_a_layer(project: Project) -> None:
    unplaced = sorted(module for module in project.modules if layer_of(module) is None)
    assert not unplaced, (
        f"modules in no layer: {unplaced}; add their unit to LAYERS in tests/test_layers.py "
        "and to the package list in docs/architecture.md"
    )
    units = {unit_of(module) for module in project.modules}
    gone = sorted(unit for placed in LAYERS.values() for unit in placed if unit not in units)
    assert not gone, f"LAYERS places units that no longer exist: {gone}; delete them"


@pytest.mark.parametrize("rule", ["upward", "adapter", "front"])
def test_imports_respect_the_layers(project: Project, rule: Rule) -> None:
    problems = ratchet(rule, layering_breaks(project)[rule], KNOWN_VIOLATIONS[rule])
    assert not problems, "\n".join(problems)


def test_no_runtime_import_cycles(project: Project) -> None:
    problems = cycle_problems(project, "cycle", KNOWN_VIOLATIONS)
    assert not problems, "\n".join(problems)


def test_no_type_only_import_cycles(project: Project) -> None:
    problems = cycle_problems(project, "type-cycle", KNOWN_VIOLATIONS)
    assert not problems, "\n".join(problems)


def test_known_violations_name_real_rules_and_edges() -> None:
    assert set(KNOWN_VIOLATIONS) == set(get_args(Rule))
    for rule, entries in KNOWN_VIOLATIONS.items():
        for edge, reason in entries.items():
            importer, arrow, imported = edge.partition(" -> ")
            assert arrow and importer.startswith(PACKAGE) and imported.startswith(PACKAGE), (rule, edge)
            assert reason.strip(), f"KNOWN_VIOLATIONS[{rule!r}][{edge!r}] needs a reason"


# The checks themselves, on small made-up graphs.


def _synthetic(*edges: tuple[str, str, Kind]) -> Project:
    imports = [Import(f"memstrata.{a}".rstrip("."), f"memstrata.{b}".rstrip("."), 1, kind) for a, b, kind in edges]
    modules = {module for found in imports for module in (found.importer, found.imported)}
    return project_of(modules, imports)


def _broken(*edges: tuple[str, str, Kind]) -> dict[str, Rule]:
    found = layering_breaks(_synthetic(*edges))
    return {edge: rule for rule, entries in found.items() for edge in entries}


def test_a_lower_layer_importing_a_higher_one_is_caught() -> None:
    assert _broken(("models", "memory", "top")) == {"memstrata.models -> memstrata.memory": "upward"}
    assert _broken(("storage.sqlite.store", "tiers.worker", "typing")) == {
        "memstrata.storage.sqlite.store -> memstrata.tiers.worker": "upward"
    }
    assert _broken(("config", "llms.prices", "function")) == {"memstrata.config -> memstrata.llms.prices": "upward"}


def test_importing_downward_or_sideways_within_a_layer_is_allowed() -> None:
    assert (
        _broken(
            ("memory", "tiers.worker", "top"),
            ("tiers.worker", "retrieval.fusion", "top"),
            ("retrieval.fusion", "embeddings.base", "top"),
            ("embeddings.openai_compat", "config", "function"),
            ("config", "validation", "top"),
        )
        == {}
    )


def test_adapters_importing_each_other_is_caught() -> None:
    assert _broken(("storage.sqlite.store", "llms.base", "top")) == {
        "memstrata.storage.sqlite.store -> memstrata.llms.base": "adapter"
    }
    assert _broken(("storage.sqlite.store", "storage.postgres.rows", "top")) == {
        "memstrata.storage.sqlite.store -> memstrata.storage.postgres.rows": "adapter"
    }
    assert _broken(("storage.base", "storage.sqlite.store", "top")) == {
        "memstrata.storage.base -> memstrata.storage.sqlite.store": "adapter"
    }
    assert (
        _broken(("storage.sqlite.store", "storage.base", "top"), ("storage.sqlite.store", "storage.sqlite.rows", "top"))
        == {}
    )


def test_fronts_reach_only_the_facade_and_the_public_vocabulary() -> None:
    assert (
        _broken(
            ("server.app", "memory", "top"),
            ("mcp.app", "", "top"),
            ("cli.common", "validation", "top"),
            ("agent.shell", "terminal", "top"),
            ("cli.server_commands", "server.app", "function"),
            ("__main__", "cli", "top"),
        )
        == {}
    )
    assert _broken(
        ("cli.common", "retrieval.fusion", "top"),
        ("server.schemas", "facade.chat", "top"),
        ("mcp.tools", "storage.base", "typing"),
        ("server.app", "cli.common", "top"),
    ) == {
        "memstrata.cli.common -> memstrata.retrieval.fusion": "front",
        "memstrata.server.schemas -> memstrata.facade.chat": "front",
        "memstrata.mcp.tools -> memstrata.storage.base": "front",
        "memstrata.server.app -> memstrata.cli.common": "front",
    }


def test_a_new_break_and_a_stale_entry_both_fail_the_ratchet() -> None:
    found = layering_breaks(_synthetic(("models", "memory", "top")))["upward"]
    assert ratchet("upward", found, {"memstrata.models -> memstrata.memory": "known"}) == []
    new = ratchet("upward", found, {})
    assert len(new) == 1 and "memstrata.models imports memstrata.memory" in new[0] and "'upward'" in new[0]
    stale = ratchet("upward", {}, {"memstrata.models -> memstrata.memory": "fixed since"})
    assert len(stale) == 1 and "delete the entry" in stale[0]


def test_runtime_cycles_count_function_imports_but_not_type_checking_ones() -> None:
    hidden = _synthetic(("a", "b", "top"), ("b", "c", "top"), ("c", "a", "function"))
    problems = cycle_problems(hidden, "cycle", {})
    assert len(problems) == 1
    assert "memstrata.a (memstrata.a:1, top-level) -> memstrata.b" in problems[0]
    assert "memstrata.c (memstrata.c:1, function-level) -> memstrata.a:" in problems[0]
    assert cycle_problems(hidden, "type-cycle", {}) == []  # reported once, as a runtime cycle

    typed = _synthetic(("a", "b", "top"), ("b", "a", "typing"))
    assert cycle_problems(typed, "cycle", {}) == []
    assert len(cycle_problems(typed, "type-cycle", {})) == 1


def test_a_known_cycle_edge_is_cut_and_must_still_close_a_cycle() -> None:
    tangled = _synthetic(("a", "b", "top"), ("b", "a", "function"))
    known: dict[Rule, dict[str, str]] = {"cycle": {"memstrata.b -> memstrata.a": "known"}}
    assert cycle_problems(tangled, "cycle", known) == []
    assert cycle_problems(tangled, "type-cycle", known) == []

    untangled = _synthetic(("a", "b", "top"))
    (stale,) = cycle_problems(untangled, "cycle", known)
    assert "delete the entry" in stale

    other = _synthetic(("a", "b", "top"), ("b", "a", "function"), ("b", "c", "top"), ("c", "b", "top"))
    (new,) = cycle_problems(other, "cycle", known)
    assert "memstrata.b" in new and "memstrata.c" in new


def test_the_parser_tags_each_import_by_where_it_sits(tmp_path: Path) -> None:
    source = tmp_path / "src" / "pkg"
    (source / "sub").mkdir(parents=True)
    for empty in ("__init__.py", "low.py", "lazy.py", "sub/__init__.py", "sub/sibling.py"):
        (source / empty).write_text("")
    (source / "sub" / "mod.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import pkg.low\n"
        "from pkg import sub\n"
        "from .sibling import name\n"
        "if TYPE_CHECKING:\n"
        "    from pkg.other import Thing\n"
        "def later():\n"
        "    from .. import low, lazy\n"
    )
    (source / "other.py").write_text("from pkg.sub.mod import value\n")
    imports = read_project(source, "pkg").imports
    kinds = {edge: (found.kind, found.line) for edge, found in imports.items()}
    assert kinds == {
        ("pkg.sub.mod", "pkg.low"): ("top", 2),  # also imported in later(): the top-level import is kept
        ("pkg.sub.mod", "pkg.sub"): ("top", 3),
        ("pkg.sub.mod", "pkg.sub.sibling"): ("top", 4),
        ("pkg.sub.mod", "pkg.other"): ("typing", 6),
        ("pkg.sub.mod", "pkg.lazy"): ("function", 8),
        ("pkg.other", "pkg.sub.mod"): ("top", 1),
    }
    assert imports[("pkg.sub.mod", "pkg.other")].path == "src/pkg/sub/mod.py"

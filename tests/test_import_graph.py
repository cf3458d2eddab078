"""The library's import graph: no cycles, and nothing reaches into the workflow's files.

Why static (ast) and not "import everything and see": a cycle between two modules
that import each other inside functions works until the day the first call happens
in the other order, and a library that reads ``workflow/`` works only inside a
checkout. Both are visible in the source, so the test reads the source: every
``import`` and ``from ... import`` at any depth (function-level ones included;
``if TYPE_CHECKING:`` blocks excluded, they never run) and ``import_module("...")``
with a constant name.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules(root: Path = SRC) -> dict[str, tuple[Path, bool]]:
    """module name -> (file, is a package ``__init__``) for every module of tersetalk."""
    mods = {}
    for path in sorted((root / "tersetalk").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        mods[".".join(parts)] = (path, is_pkg)
    return mods


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _walk(tree: ast.AST):
    """ast.walk that does not enter ``if TYPE_CHECKING:`` blocks."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if _is_type_checking(node):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _imported_names(tree: ast.AST, module: str, is_pkg: bool, type_only: bool = False):
    """Every absolute module name ``module`` imports (``a.b`` for ``from a import b``);
    with ``type_only`` also those of ``if TYPE_CHECKING:`` blocks."""
    package = module if is_pkg else module.rpartition(".")[0]
    for node in ast.walk(tree) if type_only else _walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                full = base + ("." + node.module if node.module else "")
            else:
                full = node.module or ""
            yield full
            for alias in node.names:
                yield f"{full}.{alias.name}"
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value


def import_graph(root: Path = SRC, type_only: bool = False) -> dict[str, set[str]]:
    """module -> the tersetalk modules it imports (packages count as their ``__init__``);
    ``type_only``: type-only imports (``if TYPE_CHECKING:``) count too."""
    mods = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, (path, is_pkg) in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name in _imported_names(tree, module, is_pkg, type_only):
            if name in mods and name != module:
                graph[module].add(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()


def test_no_import_cycles_among_tersetalk_modules(graph):
    found = cycles(graph)
    assert not found, "import cycles (break them by moving the shared part down):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def layer_graph(graph: dict[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    """The graph between layers: a sub-package of tersetalk (``tersetalk.agents``; a module
    of the package root would be a layer of its own) -> the layers it imports -> ``a -> b``
    edges."""

    def layer(module: str) -> str:
        return ".".join(module.split(".")[:2])

    layers: dict[str, dict[str, list[str]]] = {layer(m): {} for m in graph}
    for module, imported in graph.items():
        for name in imported:
            if layer(name) != layer(module):
                layers[layer(module)].setdefault(layer(name), []).append(f"{module} -> {name}")
    return layers


@pytest.fixture(scope="module")
def typed_graph() -> dict[str, set[str]]:
    return import_graph(type_only=True)


def test_no_cycles_even_counting_type_only_imports(typed_graph):
    found = cycles(typed_graph)
    assert not found, "cycles through `if TYPE_CHECKING:` imports (declare the interface "
    "where it is called, e.g. a Protocol):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_layers_stand_on_each_other_with_no_import_back_up(typed_graph):
    # a layer is a sub-package; every layer imports only layers below it, so the layers
    # have an order (the ground floor: tersetalk.core)
    layers = layer_graph(typed_graph)
    found = cycles({k: set(v) for k, v in layers.items()})
    edges = [e for c in found for a in c for b, es in layers[a].items() if b in c for e in es[:3]]
    assert not found, (
        "layers that import each other (move the shared part down a floor):\n"
        + "\n".join(" <-> ".join(c) for c in found)
        + "\nedges inside them:\n  "
        + "\n  ".join(edges)
    )


def test_the_layer_check_sees_a_back_edge():
    graph = {"tersetalk.a.x": {"tersetalk.b.y"}, "tersetalk.b.y": {"tersetalk.a.z"},
             "tersetalk.a.z": set()}  # fmt: skip
    layers = layer_graph(graph)
    assert cycles({k: set(v) for k, v in layers.items()}) == [["tersetalk.a", "tersetalk.b"]]


def test_type_only_imports_are_seen_when_asked(tmp_path):
    pkg = tmp_path / "tersetalk"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from tersetalk.b import B\n")  # fmt: skip
    (pkg / "b.py").write_text("import tersetalk.a\n")
    assert cycles(import_graph(tmp_path)) == []
    assert cycles(import_graph(tmp_path, type_only=True)) == [["tersetalk.a", "tersetalk.b"]]


def test_the_graph_sees_function_level_and_relative_imports(graph):
    # `tersetalk run` imports the runner inside its handler, the bench CLI imports
    # its modules relatively: a scanner that missed either would pass vacuously
    assert "tersetalk.pipeline.runner" in graph["tersetalk.cli.pipeline"]
    assert "tersetalk.bench.corpus" in graph["tersetalk.bench.cli"]
    assert len(graph) > 50


def test_nothing_imports_the_command_line(typed_graph):
    # the CLI stands above everything: a module that imported it (for its config loader,
    # say) would stand on every command's parser and handler
    users = sorted(
        f"{module} -> {name}"
        for module, imported in typed_graph.items()
        if not module.startswith("tersetalk.cli") and module != "tersetalk.__main__"
        for name in imported
        if name == "tersetalk.cli" or name.startswith("tersetalk.cli.")
    )
    assert not users, "modules that import the command line:\n  " + "\n  ".join(users)


# ---- the floors: what each part of the package may not stand on --------------------------


def _within(module: str, packages: tuple[str, ...]) -> bool:
    """Whether ``module`` is one of the sub-packages of tersetalk named, or inside one."""
    return any(module == f"tersetalk.{p}" or module.startswith(f"tersetalk.{p}.") for p in packages)


@dataclass(frozen=True)
class FloorRule:
    """Modules of ``importers`` (sub-packages of tersetalk by name; empty: every module but
    those of ``exempt``) import no module of ``forbidden`` (empty: no module of tersetalk
    outside ``importers``)."""

    name: str
    importers: tuple[str, ...]
    forbidden: tuple[str, ...]
    why: str
    exempt: tuple[str, ...] = ()
    #: ``a -> b`` edges that break the rule today and are known: each one is to go (the
    #: rule's test fails on any other edge, and on a known one that is gone)
    known: tuple[str, ...] = ()

    def offending(self, graph: dict[str, set[str]]) -> list[str]:
        """Every ``a -> b`` edge of ``graph`` that breaks the rule, sorted (known or not)."""
        found = []
        for module, imported in graph.items():
            if self.importers and not _within(module, self.importers):
                continue
            if not self.importers and _within(module, self.exempt):
                continue
            for name in imported:
                if (
                    _within(name, self.forbidden)
                    if self.forbidden
                    else not _within(name, self.importers)
                ):
                    found.append(f"{module} -> {name}")
        return sorted(found)


FLOOR_RULES = [
    FloorRule("core stands on nothing else in tersetalk", ("core",), (),
              "the ground floor: move what it needs down into tersetalk.core, or the "
              "module up to tersetalk.pipeline"),
    FloorRule("protocol imports no agents", ("protocol",), ("agents",),
              "the wire format is below the agents that speak it"),
    FloorRule("models import no agents, systems or tasks", ("models",),
              ("agents", "systems", "tasks"),
              "a model client serves every caller and knows none of them"),
    FloorRule("encoders import no agents or systems", ("encoders",), ("agents", "systems"),
              "a compressor is handed its text; the systems choose when to call it"),
    FloorRule("tasks import no systems, agents or pipeline", ("tasks",),
              ("systems", "agents", "pipeline"),
              "a task (data, prompt, scorer) knows nothing of who answers it"),
    FloorRule("formats import no mcp and no systems", ("formats",), ("mcp", "systems"),
              "the format study stands below the MCP proxy and the systems that use it"),
    FloorRule("only dashboard, bench and cli import dashboard or bench", (),
              ("dashboard", "bench"),
              "the dashboard and the benchmarks are leaves: the library never needs them",
              exempt=("dashboard", "bench", "cli")),
    FloorRule("stats imports no metrics, plots or formats", ("stats",),
              ("metrics", "plots", "formats"),
              "the statistics take numbers; metrics and figures stand on them"),
    FloorRule("the engine imports no systems or pipeline", ("agents",), ("systems", "pipeline"),
              "the agents run what a system hands them; the registry stands above them"),
    FloorRule("analysis imports no engine, systems or pipeline", ("metrics", "plots"),
              ("agents", "systems", "pipeline"),
              "metrics and figures read what the runs recorded, not the code that ran"),
    FloorRule("the topology study imports no engine, systems or pipeline", ("topology",),
              ("agents", "systems", "pipeline"),
              "the engine runs the router (tersetalk.agents.topology.Routed), so the study "
              "stands below it; what writes briefs through a routed system is a pipeline "
              "step (tersetalk.pipeline.topology_signals and its commands)"),
    FloorRule("the router imports none of the study's analysis or commands",
              ("topology.router", "topology.signals", "topology.rule"),
              ("topology.metrics", "topology.fit", "topology.heldout", "topology.plots",
               "topology.cli", "topology.fit_cli"),
              "every run imports the router; the tables, fits and figures are not its to carry"),
    FloorRule("the topology study's analysis replays the rule, not the router",
              ("topology.metrics", "topology.fit", "topology.heldout", "topology.plots"),
              ("topology.router", "topology.signals", "topology.cli", "topology.fit_cli",
               "agents", "systems", "pipeline"),
              "metrics, fits and figures read what the runs and signals files recorded and "
              "apply tersetalk.topology.rule to it again, not the code that read the briefs"),
]  # fmt: skip


@pytest.mark.parametrize("rule", FLOOR_RULES, ids=lambda r: r.name.replace(" ", "-"))
def test_each_floor_imports_nothing_it_may_not(typed_graph, rule):
    # type-only imports count: a name a module is annotated with ties it to that floor too
    found = rule.offending(typed_graph)
    new = [e for e in found if e not in rule.known]
    assert not new, f"{rule.name} ({rule.why}); these imports break it:\n  " + "\n  ".join(new)
    gone = [e for e in rule.known if e not in found]
    assert not gone, f"{rule.name}: known edges that are gone (take them off its list): {gone}"


def root_modules(root: Path = SRC) -> list[str]:
    """The modules in the package root other than ``__init__`` and ``__main__``."""
    return sorted(
        path.name
        for path in (root / "tersetalk").glob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    )


def test_the_package_root_holds_no_module_but_init_and_main():
    found = root_modules()
    assert not found, (
        "modules in the package root (put each on its floor: tersetalk.core if it stands "
        "on nothing else in tersetalk, else tersetalk.pipeline or its part's sub-package):\n  "
        + "\n  ".join(found)
    )


def test_the_floor_rules_see_a_planted_edge_and_only_it(tmp_path):
    # each rule on a tiny graph: the edge that breaks it is found; an import inside the
    # importer's own package, and the same import made by a module the rule does not
    # govern, are not
    for rule in FLOOR_RULES:
        importer = f"tersetalk.{rule.importers[0]}.a" if rule.importers else "tersetalk.plots.a"
        target = f"tersetalk.{rule.forbidden[0]}.b" if rule.forbidden else "tersetalk.protocol.b"
        own = importer.rpartition(".")[0] + ".c"
        bystander = f"tersetalk.{rule.exempt[0]}.d" if rule.exempt else "tersetalk.cli.d"
        graph = {importer: {target, own}, own: set(), target: set(), bystander: {target}}
        assert rule.offending(graph) == [f"{importer} -> {target}"], rule.name
    # the root check finds a loose module beside __init__ and __main__, and nothing else
    pkg = tmp_path / "tersetalk"
    (pkg / "core").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "core/__init__.py", "core/io.py", "runner.py"):
        (pkg / name).write_text("")
    assert root_modules(tmp_path) == ["runner.py"]


def test_cycle_finder_finds_a_cycle_and_ignores_a_chain():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


# ---- the library never reaches into workflow/ --------------------------------------------

#: a path that goes through the workflow folder: "workflow", "workflow/rules/x.smk",
#: "../workflow/schemas" (whitespace means a sentence, such as an error message, not a path)
WORKFLOW_PATH = re.compile(r"(^|[/\\])workflow([/\\]|$)")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                ids.add(id(value))
    return ids


def workflow_references(root: Path = SRC) -> list[str]:
    """``file:line: what`` for every import from, or path into, ``workflow/``."""
    found = []
    for module, (path, is_pkg) in _modules(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        docs = _docstrings(tree)
        for name in _imported_names(tree, module, is_pkg):
            if name.split(".")[0] == "workflow":
                found.append(f"{path}: imports {name}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docs
                and not re.search(r"\s", node.value)
                and WORKFLOW_PATH.search(node.value)
            ):
                found.append(f"{path}:{node.lineno}: path {node.value!r}")
    return found


def test_no_library_module_imports_or_reads_workflow():
    found = workflow_references()
    assert not found, "the library must work outside a checkout:\n" + "\n".join(found)


def test_workflow_reference_finder_catches_a_repository_search(tmp_path):
    pkg = tmp_path / "tersetalk"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""Docs may say workflow/schemas/x.yaml."""\n')
    (pkg / "paths.py").write_text(
        "from pathlib import Path\n"
        "ROOT = Path(__file__).parents[2]\n"
        'SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"\n'
        'HINT = "see workflow/schemas/ for the keys"\n'
        "def rules():\n"
        "    import workflow.rules\n"
    )
    found = workflow_references(tmp_path)
    assert len(found) == 2
    assert "imports workflow.rules" in found[0] and "'workflow'" in found[1]


def test_the_config_schema_is_package_data_and_workflow_links_to_it():
    schema = resources.files("tersetalk").joinpath("schemas/config.schema.yaml")
    assert schema.is_file()
    link = SRC.parent / "workflow" / "schemas" / "config.schema.yaml"
    assert link.is_symlink() and not Path(link.readlink()).is_absolute()
    assert link.resolve() == (SRC / "tersetalk" / "schemas" / "config.schema.yaml").resolve()

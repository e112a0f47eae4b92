"""The house rules on imports (guide; issue 20, part 8), read from the source with ast:

* no module imports another module's private (_underscore) names, by ``from x import _y``
  or by ``x._y`` on an imported module;
* no import circle among the modules of proofs/, counting imports inside functions (a
  function-level import only hides a circle from the interpreter, not from the reader).

Each rule is also run on a small known-bad source, which it must reject.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("mechanisms", "learning", "proofs", "sims")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative levels resolved)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(path: Path, root: Path = ROOT):
    """(target module, name or None, private?) for every import in the file, at any depth;
    plus (module, attribute) for ``alias._attr`` uses of an imported module alias."""
    module, is_package = module_name(path, root), path.name == "__init__.py"
    tree = ast.parse(path.read_text())
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = absolute(module, is_package, node)
            for a in node.names:
                found.append((target, a.name))
                aliases[a.asname or a.name] = f"{target}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                found.append((a.name, None))
                top = a.name.split(".")[0]
                aliases[a.asname or top] = a.name if a.asname else top
    attrs = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            attrs.append((aliases[node.value.id], node.attr))
    return module, found, attrs


def first_party(target: str) -> bool:
    return target.split(".")[0] in PACKAGES


def private_imports(paths, root: Path = ROOT) -> list[str]:
    bad = []
    for path in paths:
        module, found, attrs = imports(path, root)
        for target, name in found:
            if first_party(target) and name and name.startswith("_") and target != module:
                bad.append(f"{module}: from {target} import {name}")
        for target, attr in attrs:
            if first_party(target) and target != module:
                bad.append(f"{module}: {target}.{attr}")
    return bad


def import_graph(package: str, paths, root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (at any depth in the file)."""
    graph = {}
    names = {module_name(p, root) for p in paths}
    for path in paths:
        module, found, _ = imports(path, root)
        edges = set()
        for target, name in found:
            for cand in (f"{target}.{name}" if name else None, target):
                if cand in names and cand != module and cand != package:
                    edges.add(cand)
                    break
        graph[module] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def sources(package):
    return sorted((ROOT / package).rglob("*.py"))


def test_no_module_imports_another_modules_private_names():
    paths = [p for pkg in PACKAGES for p in sources(pkg)]
    assert len(paths) > 40
    assert private_imports(paths) == []


def test_the_private_import_rule_rejects_a_known_bad_source(tmp_path):
    pkg = tmp_path / "proofs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import _hidden\n    return _hidden\n")
    (pkg / "c.py").write_text("from . import b\nx = b._hidden\n")
    (pkg / "b.py").write_text("_hidden = 1\nfrom . import b as me\n")
    bad = private_imports(sorted(pkg.glob("*.py")), tmp_path)
    assert sorted(bad) == ["proofs.a: from proofs.b import _hidden",
                           "proofs.c: proofs.b._hidden"]


def test_the_circle_rule_finds_a_function_level_circle(tmp_path):
    pkg = tmp_path / "proofs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("from .b import g\n\ndef f():\n    return g()\n")
    (pkg / "b.py").write_text("def g():\n    from . import a\n    return a\n")
    (pkg / "c.py").write_text("from .a import f\n")
    graph = import_graph("proofs", sorted(pkg.glob("*.py")), tmp_path)
    assert circles(graph) == [{"proofs.a", "proofs.b"}]


def proofs_circles():
    paths = sources("proofs")
    graph = import_graph("proofs", paths)
    assert graph["proofs.checker"] >= {"proofs.core", "proofs.batch"}  # the graph is read
    return circles(graph)


def test_the_engines_and_their_core_are_in_no_import_circle():
    """proofs.core (report, tally, verdict, properties, the catalogue) imports nothing of
    proofs but profiles; the Hypothesis engine (checker) imports the batch engine, never the
    other way; registry, contract, subjects and the CPL properties sit in no circle."""
    inside = set().union(*proofs_circles())
    for name in ("core", "checker", "contract", "registry", "subjects", "cpl_properties",
                 "report", "strategies", "regret"):
        assert f"proofs.{name}" not in inside, (name, proofs_circles())


def test_no_import_circle_among_the_proofs_modules():
    """The last circle (batch <-> ipfl_properties) is gone: the iPFL properties evaluate
    themselves in bulk (Property.batch) and own the bulk clearing they run; proofs.batch
    imports them, never the other way."""
    assert proofs_circles() == []
    graph = import_graph("proofs", sources("proofs"))
    assert "proofs.batch" in graph["proofs.checker"] and "proofs.batch" not in set().union(
        *(graph[m] for m in ("proofs.ipfl_properties", "proofs.cpl_properties")))


def test_no_import_circle_among_the_sims_modules_and_one_interval():
    """sims has no circle (at any depth: function-level imports count), and the seed-level
    interval has one home, sims.stats, which the verdicts, the report's tables, the ranking
    and the plots import and which imports no sims module."""
    graph = import_graph("sims", sources("sims"))
    assert graph["sims.claims"] >= {"sims.stats", "sims.comparison"}  # the graph is read
    assert circles(graph) == []
    assert graph["sims.stats"] == set()
    for user in ("claims", "comparison", "report", "ranking", "plots"):
        assert "sims.stats" in graph[f"sims.{user}"], user
    assert "sims.claims" not in graph["sims.comparison"]

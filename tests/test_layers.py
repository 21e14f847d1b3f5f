"""Imports follow the layers of docs/ARCHITECTURE.md: a module imports only from its own layer or
the layers below it, and no module imports itself through others (no import cycle). Both are checked
on the source, so a lazy import inside a function counts too."""

import ast
import os

from conftest import ROOT

# top-level module or package of tunebench -> layer (docs/ARCHITECTURE.md, "Layers")
LAYERS = {
    "errors": 0, "safe_files": 0, "tensor_files": 0, "testing": 6, "resources": 0, "search_space": 0, "listed_space": 0, "task": 0, "record_file": 0, "pareto": 0,
    "run_lookup": 0, "config": 0, "history": 1, "protocol": 1, "datasets": 2, "targets": 3, "methods": 4,
    "harness": 5, "report": 6, "__main__": 7,
}
SRC = os.path.join(ROOT, "src")


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "tunebench":
        return None
    return 0 if len(parts) == 1 else LAYERS.get(parts[1])


def _modules() -> dict[str, str]:
    """tunebench module name -> its file (packages by their ``__init__.py``)."""
    out = {}
    for folder, _, files in os.walk(SRC):
        for name in files:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, name), SRC)[: -len(".py")].replace(os.sep, ".")
                out[("tunebench." + rel.removesuffix("__init__")).rstrip(".")] = os.path.join(folder, name)
    return out


def _imports(module: str, path: str, modules: dict[str, str]) -> set[str]:
    """The tunebench modules ``module`` imports (``from a import b``: ``a.b`` when it is a module, else
    ``a``; relative imports resolved)."""
    package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    return {m for m in out if m.startswith("tunebench") and m != module}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: {i for i in _imports(m, p, modules) if i in modules} for m, p in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_every_module_has_a_layer():
    missing = sorted({m.split(".")[1] for m in _modules() if m != "tunebench"} - set(LAYERS))
    assert not missing, f"add {missing} to LAYERS and docs/ARCHITECTURE.md"


def test_no_import_goes_up_a_layer():
    upward = [f"{module} (layer {_layer(module)}) imports {name} (layer {_layer(name)})"
              for module, names in _graph().items() for name in names
              if _layer(module) is not None and _layer(name) is not None and _layer(name) > _layer(module)]
    assert not upward, "\n".join(upward)


def test_no_import_cycle():
    cycles = _cycles(_graph())
    assert not cycles, "modules that import each other (through others): " + "; ".join(map(str, cycles))


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


# the packages and modules that hold no backend: a backend is one package under targets/ (TVM: targets/tvm/)
BACKEND_FREE = ("harness", "protocol", "datasets", "task.py", "testing")


def _tvm_imports(source: str) -> list[int]:
    """The lines of ``source`` that import ``tvm`` or a module of it (lazy imports included)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(n == "tvm" or n.startswith("tvm.") for n in names):
            lines.append(node.lineno)
    return lines


def test_the_backend_free_layers_import_no_tvm():
    paths = []
    for entry in BACKEND_FREE:
        top = os.path.join(SRC, entry)
        if entry.endswith(".py"):
            paths.append(top)
        else:
            paths += [os.path.join(folder, n) for folder, _, files in os.walk(top) for n in files if n.endswith(".py")]
    assert len(paths) > 50, paths  # the walk found the packages
    found = [f"{os.path.relpath(p, SRC)}:{line}" for p in paths for line in _tvm_imports(open(p).read())]
    assert not found, "TVM is imported outside targets/tvm/ (move it there, or let the target supply it): " + ", ".join(found)


def test_the_tvm_check_finds_tvm_imports():
    source = "import os\nimport tvm.relax\ndef f():\n    from tvm import te\nfrom tvmx import a\nfrom .tvm import b\n"
    assert _tvm_imports(source) == [2, 4]


#: what a method may import of targets/: the registry, the core contract and the capabilities
CONTRACT = {"tunebench.targets", "tunebench.targets.base", "tunebench.targets.capabilities"}


def _backend_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Method module -> the modules of targets/ it imports beyond :data:`CONTRACT` (a backend's own)."""
    found = {m: sorted(n for n in names if n.startswith("tunebench.targets") and n not in CONTRACT)
             for m, names in graph.items() if m.startswith("tunebench.methods")}
    return {m: names for m, names in found.items() if names}


def test_methods_see_targets_only_through_the_contract():
    """A method reaches a target through the registry, TargetInfo and the capabilities
    (:mod:`tunebench.targets.capabilities`), never a backend's modules (targets/<backend>/)."""
    found = _backend_imports(_graph())
    assert not found, ("methods import a backend's modules (let the target offer what the method needs as a "
                       f"capability, or move the shared piece below targets/): {found}")


def test_the_backend_import_check_finds_one():
    graph = {"tunebench.methods.x": {"tunebench.targets.capabilities", "tunebench.targets.tvm.llvm"},
             "tunebench.methods.y": {"tunebench.targets", "tunebench.targets.base"},
             "tunebench.harness.z": {"tunebench.targets.tvm.llvm"}}
    assert _backend_imports(graph) == {"tunebench.methods.x": ["tunebench.targets.tvm.llvm"]}


#: the methods that are TVM by nature and may import ``tvm`` (a package: every module under it); the
#: others (autotvm, glimpse, ...) reach TVM only through what the target offers
TVM_METHODS = ("methods/tensor_programs/metaschedule.py", "methods/tensor_programs/gat/")


def test_only_the_tvm_methods_import_tvm():
    top = os.path.join(SRC, "methods")
    paths = [os.path.join(folder, n) for folder, _, files in os.walk(top) for n in files if n.endswith(".py")]
    found = sorted(rel for p in paths if _tvm_imports(open(p).read())
                   for rel in [os.path.relpath(p, SRC).replace(os.sep, "/")])
    assert found and all(rel.startswith(TVM_METHODS) for rel in found), (
        "TVM imported by a method that is not TVM by nature (let the target offer it, or list the method in "
        f"TVM_METHODS): {[rel for rel in found if not rel.startswith(TVM_METHODS)]}")

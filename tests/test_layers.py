"""Imports follow the layers of docs/ARCHITECTURE.md: a module imports only from its own layer or
the layers below it (checked on the source, so a lazy import inside a function counts too)."""

import ast
import os

from conftest import ROOT

# top-level module or package of tunebench -> layer (docs/ARCHITECTURE.md, "Layers")
LAYERS = {
    "errors": 0, "safe_files": 0, "resources": 0, "space": 0, "task": 0, "records": 0, "pareto": 0,
    "run_store": 0, "history": 1, "protocol": 1, "datasets": 2, "targets": 3, "methods": 4,
    "harness": 5, "report": 6, "__main__": 7,
}
SRC = os.path.join(ROOT, "src")


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "tunebench":
        return None
    return 0 if len(parts) == 1 else LAYERS.get(parts[1])


def _modules():
    for folder, _, files in os.walk(SRC):
        for name in files:
            if name.endswith(".py") and name != "__init__.py" or name == "__init__.py" and folder != SRC:
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, SRC)[: -len(".py")].replace(os.sep, ".").removesuffix(".__init__")
                yield "tunebench." + rel, path


def test_every_module_has_a_layer():
    missing = sorted({m.split(".")[1] for m, _ in _modules()} - set(LAYERS))
    assert not missing, f"add {missing} to LAYERS and docs/ARCHITECTURE.md"


def test_no_import_goes_up_a_layer():
    upward = []
    for module, path in _modules():
        own = _layer(module)
        for node in ast.walk(ast.parse(open(path).read())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                other = _layer(name)
                if other is not None and own is not None and other > own:
                    upward.append(f"{module} (layer {own}) imports {name} (layer {other})")
    assert not upward, "\n".join(upward)

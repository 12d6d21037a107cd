"""The package's import graph has no cycle: no module imports a module that imports it back, whether by an import
statement (at the top or inside a function) or by naming it to `importlib` (`'ael_nb.x'` as a string)."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / 'ael_nb'
MODULES = {p.stem for p in PKG.glob('*.py') if p.stem not in ('__init__', '_modidx')}

def imported(source: str, modules=MODULES) -> set[str]:
    "The kit's modules that `source` imports: import statements anywhere, and strings 'ael_nb.x' (importlib's names)."
    def kit(name): return name.split('.')[1] if name and name.startswith('ael_nb.') else None
    found = set()
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Import): found |= {kit(a.name) for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.level == 0: found.add(kit(n.module))
        elif isinstance(n, ast.ImportFrom): found |= {n.module.split('.')[0]} if n.module else {a.name for a in n.names}
        elif isinstance(n, ast.Constant) and isinstance(n.value, str): found.add(kit(n.value))
    return found & set(modules)

def cycle(graph: dict) -> list:
    "One cycle of `graph` (module -> modules it imports) as a path that ends where it starts, or [] if there is none."
    done, path = set(), []
    def visit(m):
        if m in path: return path[path.index(m):] + [m]
        if m in done: return []
        path.append(m)
        for d in sorted(graph.get(m, ())):
            if (c := visit(d)): return c
        path.pop(); done.add(m)
        return []
    for m in sorted(graph):
        if (c := visit(m)): return c
    return []

def test_the_parser_sees_every_kind_of_import():
    src = ("from .core import x\nfrom . import model\nimport ael_nb.plan\nfrom ael_nb.state import y\n"
           "def f():\n    from .train import z\n    return importlib.import_module('ael_nb.synthetic')\n"
           "LAZY = {'folder': ('ael_nb.folder', 'FolderDataset')}\n'''docs about ael_nb.config'''\n")
    assert imported(src) == {'core', 'model', 'plan', 'state', 'train', 'synthetic', 'folder'}

def test_cycle_finds_a_cycle_and_only_one():
    assert cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']
    assert cycle({'a': {'b', 'c'}, 'b': {'c'}, 'c': set()}) == []

def test_the_package_has_no_import_cycle():
    graph = {m: imported((PKG / f'{m}.py').read_text()) - {m} for m in MODULES}
    assert len(MODULES) > 30 and graph['train'] >= {'config', 'plan', 'state'}   # the graph is the package's
    assert not (c := cycle(graph)), f"import cycle: {' -> '.join(c)}"

"""The house style, counted: export cells and their length, public definitions followed by their example, long lines.

    python tools/style_counts.py nbs/01_conf_bank.ipynb nbs/03_aes.ipynb   # per notebook and in total
    python tools/style_counts.py                                           # the engine notebooks (00_core .. 21_faults)
    python tools/style_counts.py --violations nbs/20_train.ipynb           # what breaks a rule, one line each
    python tools/style_counts.py --guide [--fastcore PATH]                 # rewrite the table in docs/GUIDE.md

An export cell is a code cell with an `#| export...` directive; its length counts its lines without the directives.
A public definition is a top-level `def`/`class` (a `@patch`ed method included) of an export cell whose name does not
start with `_`. It is followed by its example when the next code cell (markdown between is fine) is not an export cell
and uses the name (as a name or an attribute, not in a comment). A long line is a line of any code cell over 120
characters; a long prose line, one of a markdown cell, table rows and lines holding a link aside (they cannot wrap).
"""
from __future__ import annotations
import argparse, ast, json, re, statistics, subprocess, sys, tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / 'docs' / 'GUIDE.md'
BEFORE = '30528c0'
MAX_CELL, MAX_LINE = 40, 120
BEGIN, END = '<!-- style_counts: begin -->', '<!-- style_counts: end -->'
DIRECTIVE = re.compile(r'^\s*#\|\s*(\w+)')


def is_engine(name: str) -> bool:
    "Whether a notebook file name is one of the engine notebooks, 00_core .. 21_faults (08a, 14a, 18a-c included)."
    m = re.match(r'^(\d\d)[a-z]?_.*\.ipynb$', name)
    return bool(m) and int(m.group(1)) <= 21


def engine_notebooks(nbs: Path = ROOT / 'nbs') -> list[Path]:
    "The engine notebooks of a `nbs` folder, in order."
    return sorted(p for p in nbs.glob('*.ipynb') if is_engine(p.name))


def directives(src: str) -> list[str]:
    "The names of a cell's `#|` directives (`export`, `hide`, ...)."
    return [m.group(1) for line in src.splitlines() if (m := DIRECTIVE.match(line))]


def is_export(src: str) -> bool:
    "Whether a code cell is exported (`#| export`, `exports`, `exporti`, ...)."
    return any(d.startswith('export') for d in directives(src))


def parse(src: str) -> ast.Module | None:
    "The cell's syntax tree, IPython magics and shell lines blanked; None if it still does not parse."
    lines = ['' if re.match(r'^\s*[%!]', line) else line for line in src.splitlines()]
    try: return ast.parse('\n'.join(lines))
    except SyntaxError: return None


def public_defs(src: str) -> list[str]:
    "Names of the top-level functions and classes of a cell that do not start with `_`."
    tree = parse(src)
    if tree is None: return []
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [n.name for n in tree.body if isinstance(n, defs) and not n.name.startswith('_')]


def used_names(src: str) -> set[str]:
    "Every name and attribute a cell's code uses (comments and strings aside); falls back to its words."
    tree = parse(src)
    if tree is None: return set(re.findall(r'\w+', src))
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(tree)
            if isinstance(n, (ast.Name, ast.Attribute))}


def code_lines(src: str) -> list[str]:
    "The lines of a cell that are not directives."
    return [line for line in src.splitlines() if not DIRECTIVE.match(line)]


@dataclass
class Counts:
    "What `count` finds in one notebook (or several, added up)."
    name: str
    cell_lines: list[int] = field(default_factory=list)  # lines of each export cell
    defs: list[str] = field(default_factory=list)  # 'cell N: name' of each public definition
    missing: list[str] = field(default_factory=list)  # those not followed by their example
    long_cells: list[str] = field(default_factory=list)  # 'cell N (L lines)' of each export cell over MAX_CELL
    long_lines: list[str] = field(default_factory=list)  # 'cell N line K (L chars)' of each line over MAX_LINE
    long_prose: list[str] = field(default_factory=list)  # the same, of the markdown cells' prose

    def __add__(self, other: Counts) -> Counts:
        return Counts('total', *(getattr(self, k) + getattr(other, k)
                                 for k in ('cell_lines', 'defs', 'missing', 'long_cells', 'long_lines', 'long_prose')))

    def row(self) -> dict:
        "The counted numbers, as the table prints them."
        n, d = len(self.cell_lines), len(self.defs)
        med = statistics.median(self.cell_lines) if n else 0
        return {'export cells': n, 'median lines': f'{med:g}',
                'max lines': max(self.cell_lines, default=0), f'cells > {MAX_CELL}': len(self.long_cells),
                'public defs': d, 'with example': f'{100 * (d - len(self.missing)) / d:.0f} %' if d else '-',
                f'lines > {MAX_LINE}': len(self.long_lines)}


def count(path: Path, name: str | None = None) -> Counts:
    "Count one notebook's export cells, public definitions with and without their example, and long lines."
    every = json.loads(Path(path).read_text())['cells']
    cells = [c for c in every if c['cell_type'] == 'code']
    c = Counts(name or Path(path).stem)
    for i, cell in enumerate(every):
        if cell['cell_type'] != 'markdown': continue
        for k, line in enumerate(''.join(cell['source']).splitlines(), 1):
            if len(line) > MAX_LINE and not line.lstrip().startswith('|') and 'http' not in line:
                c.long_prose.append(f"cell {cell.get('id', i)} line {k} ({len(line)} chars)")
    for i, cell in enumerate(cells):
        src, at = ''.join(cell['source']), f"cell {cell.get('id', i)}"  # the id, as nbdev-clean keeps it
        for k, line in enumerate(src.splitlines(), 1):
            if len(line) > MAX_LINE: c.long_lines.append(f'{at} line {k} ({len(line)} chars)')
        if not is_export(src): continue
        c.cell_lines.append(len(code_lines(src)))
        if c.cell_lines[-1] > MAX_CELL: c.long_cells.append(f'{at} ({c.cell_lines[-1]} lines)')
        nxt = ''.join(cells[i + 1]['source']) if i + 1 < len(cells) else ''
        used = set() if is_export(nxt) else used_names(nxt)
        for d in public_defs(src):
            c.defs.append(f'{at}: {d}')
            if d not in used: c.missing.append(f'{at}: {d}')
    return c


def table(rows: list[Counts], first: str = 'notebook') -> str:
    "A markdown table of `rows`, one line each."
    cols = list(rows[0].row()) if rows else []
    lines = [f"| {first} | " + ' | '.join(cols) + ' |', '|---' * (len(cols) + 1) + '|']
    return '\n'.join(lines + [f"| {r.name} | " + ' | '.join(str(v) for v in r.row().values()) + ' |' for r in rows])


def total(counts: list[Counts], name: str) -> Counts:
    "The counts of several notebooks added up under one name."
    t = Counts(name)
    for c in counts: t = t + c
    t.name = name
    return t


def engine_at(commit: str) -> list[Counts]:
    "The counts of the engine notebooks as they were at a commit of this repository (read with git show)."
    names = subprocess.run(['git', 'ls-tree', '--name-only', commit, 'nbs/'], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            if not is_engine(Path(n).name): continue
            p = Path(tmp) / Path(n).name
            p.write_text(subprocess.run(['git', 'show', f'{commit}:{n}'], cwd=ROOT, check=True,
                                        capture_output=True, text=True).stdout)
            out.append(count(p))
    return out


def head() -> str:
    "This repository's current commit, short, with ' + changes' when the notebooks differ from it."
    git = lambda *a: subprocess.run(['git', *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return git('rev-parse', '--short', 'HEAD') + (' + changes' if git('status', '--porcelain', 'nbs') else '')


def guide(fastcore: Path | None, fastcore_commit: str | None) -> str:
    "Rewrite the table between the markers in docs/GUIDE.md: engine before and now, and fastcore's 01_basics."
    text = GUIDE.read_text()
    if BEGIN not in text or END not in text: sys.exit(f"{GUIDE}: the markers {BEGIN} and {END} are missing")
    pre, rest = text.split(BEGIN, 1)
    old, post = rest.split(END, 1)
    rows = [total(engine_at(BEFORE), f'engine notebooks, before ({BEFORE})'),
            total([count(p) for p in engine_notebooks()], f'engine notebooks, now ({head()})')]
    body = table(rows, 'notebooks').splitlines()
    if fastcore is not None:
        body.append(table([count(fastcore, f"fastcore's 01_basics ({fastcore_commit or '?'})")]).splitlines()[-1])
    else:
        body += [line for line in old.splitlines() if line.startswith("| fastcore")]
    GUIDE.write_text(pre + BEGIN + '\n' + '\n'.join(body) + '\n' + END + post)
    return '\n'.join(body)


def main(argv: list[str] | None = None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('notebooks', nargs='*', type=Path, help='notebooks to count (default: the engine notebooks)')
    p.add_argument('--violations', action='store_true', help='list every violation, not only the numbers')
    p.add_argument('--guide', action='store_true', help='rewrite the table in docs/GUIDE.md')
    p.add_argument('--fastcore', type=Path, help="fastcore's nbs/01_basics.ipynb, for the guide's reference row")
    p.add_argument('--fastcore-commit', help='the fastcore commit that file comes from')
    a = p.parse_args(argv)
    if a.guide: print(guide(a.fastcore, a.fastcore_commit)); return
    counts = [count(nb) for nb in (a.notebooks or engine_notebooks())]
    print(table(counts + [total(counts, 'total')]))
    if a.violations:
        for c in counts:
            for what in ('missing', 'long_cells', 'long_lines', 'long_prose'):
                for v in getattr(c, what): print(f'{c.name}: {what}: {v}')


if __name__ == '__main__': main()

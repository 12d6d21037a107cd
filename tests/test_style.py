"""The house style of the engine notebooks (00_core .. 21_faults), counted by tools/style_counts.py: every public
definition followed by its example, no export cell over 40 lines, no code line over 120 characters, and no prose
line over 120 characters (a table row and a line holding a link cannot wrap)."""
import importlib.util, json, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location('style_counts', ROOT / 'tools' / 'style_counts.py')
style_counts = importlib.util.module_from_spec(spec); sys.modules['style_counts'] = style_counts
spec.loader.exec_module(style_counts)
ENGINE = style_counts.engine_notebooks(ROOT / 'nbs')


def test_the_engine_notebooks_are_found():
    "00_core .. 21_faults, the lettered ones included, and none of the tutorials after them."
    names = [p.stem for p in ENGINE]
    assert names[0] == '00_core' and names[-1] == '21_faults'
    assert {'08a_folder', '14a_paper', '18c_methods'} <= set(names)
    assert not any(n.startswith(('22_', '23_', 'index')) for n in names)


@pytest.mark.parametrize('nb', ENGINE, ids=lambda p: p.stem)
def test_every_public_definition_is_followed_by_its_example(nb):
    c = style_counts.count(nb)
    assert not c.missing, f"{nb.name}: no example in the next code cell for " + '; '.join(c.missing)


@pytest.mark.parametrize('nb', ENGINE, ids=lambda p: p.stem)
def test_no_export_cell_over_40_lines(nb):
    c = style_counts.count(nb)
    assert not c.long_cells, f"{nb.name}: export cells over {style_counts.MAX_CELL} lines: " + '; '.join(c.long_cells)


@pytest.mark.parametrize('nb', ENGINE, ids=lambda p: p.stem)
def test_no_code_line_over_120_characters(nb):
    c = style_counts.count(nb)
    assert not c.long_lines, f"{nb.name}: lines over {style_counts.MAX_LINE} characters: " + '; '.join(c.long_lines)


@pytest.mark.parametrize('nb', ENGINE, ids=lambda p: p.stem)
def test_no_prose_line_over_120_characters(nb):
    c = style_counts.count(nb)
    assert not c.long_prose, f"{nb.name}: prose lines over {style_counts.MAX_LINE} characters: " + '; '.join(c.long_prose)


def _notebook(path: Path, *cells: tuple[str, str, str]) -> Path:
    "A notebook of (cell type, id, source) cells, written to `path`."
    path.write_text(json.dumps({'cells': [dict(cell_type=k, id=i, metadata={}, source=s, **(
        dict(outputs=[], execution_count=None) if k == 'code' else {})) for k, i, s in cells],
        'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}))
    return path


def test_the_counter_finds_planted_violations(tmp_path):
    "A definition without example, one whose next cell is an export cell, a 41-line cell and a 121-character line."
    long_cell = '#| export\ndef big():\n' + '    x = 1\n' * 38 + '    return x\n'
    nb = _notebook(tmp_path / 'x.ipynb',
                   ('code', 'a1', '#| export\ndef shown(x): return x\ndef _private(): pass\n'),
                   ('markdown', 'm1', 'Prose between is fine; a comment naming `alone` is no use of it.'),
                   ('code', 'a2', 'assert shown(1) == 1\n'),
                   ('code', 'b1', '#| export\ndef alone(): pass\n'),
                   ('code', 'b2', '# alone()\nprint("alone")\n'),
                   ('code', 'c1', '#| export\nclass Told: pass\n'),
                   ('code', 'c2', '#| export\ndef later(t: Told): return t\n'),
                   ('code', 'c3', 'later(Told())\n'),
                   ('code', 'd1', long_cell),
                   ('code', 'd2', 'big()\n' + 'x = 1' + ' ' * 111 + '# 121\n'))
    c = style_counts.count(nb)
    assert c.defs == ['cell a1: shown', 'cell b1: alone', 'cell c1: Told', 'cell c2: later', 'cell d1: big']
    assert c.missing == ['cell b1: alone', 'cell c1: Told']
    assert c.cell_lines == [2, 1, 1, 1, 40] and c.long_cells == []
    assert c.long_lines == ['cell d2 line 2 (121 chars)']
    _notebook(nb, ('code', 'd1', long_cell.replace('return x', 'x = 2\n    return x')), ('code', 'd2', 'big()'))
    c = style_counts.count(nb)
    assert c.long_cells == ['cell d1 (41 lines)'] and c.missing == [] and c.long_lines == []
    assert c.row() == {'export cells': 1, 'median lines': '41', 'max lines': 41, 'cells > 40': 1, 'public defs': 1,
                       'with example': '100 %', 'lines > 120': 0}


def test_guide_rewrites_only_the_table_between_its_markers(tmp_path, monkeypatch):
    "`--guide` recounts both engine rows, keeps the recorded fastcore row without its file, and nothing else moves."
    nb = _notebook(tmp_path / '00_x.ipynb', ('code', 'a', '#| export\ndef f(): pass\n'), ('code', 'b', 'f()\n'))
    guide = tmp_path / 'GUIDE.md'
    old_fastcore = "| fastcore's 01_basics (abc1234) | 161 | 5 | 45 | 1 | 153 | 78 % | 10 |"
    guide.write_text(f"before\n{style_counts.BEGIN}\n| stale |\n{old_fastcore}\n{style_counts.END}\nafter\n")
    monkeypatch.setattr(style_counts, 'GUIDE', guide)
    monkeypatch.setattr(style_counts, 'engine_at', lambda commit: [style_counts.count(nb)])
    monkeypatch.setattr(style_counts, 'engine_notebooks', lambda: [nb, nb])
    style_counts.main(['--guide'])
    text = guide.read_text()
    assert text.startswith(f"before\n{style_counts.BEGIN}\n| notebooks |")
    assert text.endswith(f"{style_counts.END}\nafter\n")
    rows = [l for l in text.splitlines() if l.startswith('| engine') or l.startswith('| fastcore')]
    assert rows[0].startswith(f'| engine notebooks, before ({style_counts.BEFORE}) | 1 | 1 | 1 | 0 | 1 | 100 % | 0 |')
    assert rows[1].split(' | ')[1:] == ['2', '1', '1', '0', '2', '100 %', '0 |'] and rows[2] == old_fastcore
    assert '| stale |' not in text


def test_long_prose_is_found(tmp_path):
    "A 121-character prose line is found; a long table row and a long line holding a link are not."
    nb = _notebook(tmp_path / 'p.ipynb', ('markdown', 'm1', 'x' * 121 + '\n| ' + 'y' * 130 + ' |\n'),
                   ('markdown', 'm2', 'short\nsee https://' + 'z' * 130))
    assert style_counts.count(nb).long_prose == ['cell m1 line 1 (121 chars)']

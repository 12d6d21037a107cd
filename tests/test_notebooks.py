"""What the notebooks store: the metadata JupyterLab writes (else opening a notebook modifies it), and outputs that
must equal what the code generates today (else GitHub shows a stale or empty table)."""
import json
import re
from pathlib import Path
import pytest

NBS = Path(__file__).resolve().parents[1] / 'nbs'
NOTEBOOKS = sorted(NBS.glob('*.ipynb'))

def metadata(nb: Path) -> dict: return json.loads(nb.read_text())['metadata']

@pytest.mark.parametrize('nb', NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_stores_the_kernel_and_language_jupyterlab_writes(nb):
    "Every notebook stores one `kernelspec` and one `language_info`, those of the first (what nbdev-clean keeps)."
    first = metadata(NOTEBOOKS[0])
    assert 'language_info' in first and first['language_info']['name'] == 'python'
    m = metadata(nb)
    assert m.get('kernelspec') == first['kernelspec'], f"{nb.name}: kernelspec {m.get('kernelspec')}"
    assert m.get('language_info') == first['language_info'], f"{nb.name}: language_info {m.get('language_info')}"

def test_differences_notebook_stores_the_generated_table():
    "27_differences stores the output of its table cell, and it is `differences_table()` as the code makes it now."
    from ael_nb.config import differences_table
    cells = json.loads((NBS / '27_differences.ipynb').read_text())['cells']
    cell, = [c for c in cells if c['cell_type'] == 'code' and re.search(r'(?<!\w)differences_table\(\)', ''.join(c['source']))]
    stored = [''.join(o['data']['text/markdown']) for o in cell['outputs'] if 'text/markdown' in o.get('data', {})]
    assert stored == [differences_table()], ("nbs/27_differences.ipynb stores another table than differences_table() "
                                             "makes: run `nbdev-test --save nbs/27_differences.ipynb && nbdev-clean`")

def test_differences_notebook_stores_the_v2_table():
    "27_differences stores UniMatch V2's table as `v2_differences_table()` makes it now."
    from ael_nb.config import v2_differences_table
    cells = json.loads((NBS / '27_differences.ipynb').read_text())['cells']
    cell, = [c for c in cells if c['cell_type'] == 'code' and 'v2_table()' in ''.join(c['source'])]
    stored = [''.join(o['data']['text/markdown']) for o in cell['outputs'] if 'text/markdown' in o.get('data', {})]
    assert stored == [v2_differences_table()], ("nbs/27_differences.ipynb stores another V2 table than the code makes: "
                                                "run `nbdev-test --save nbs/27_differences.ipynb && nbdev-clean`")

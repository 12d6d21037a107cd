"""The docs site, as far as it builds without quarto: nbdev-docs first runs nbdev's doc processors over every notebook
(the settings in pyproject's [tool.nbdev]), then quarto renders the result. Here every notebook goes through those
processors, as `nbdev-docs` runs them, and must come out a page (a title, its output file) with no error and no warning.
quarto's render is `.ci/run`'s step where quarto installs."""
import os, warnings
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parents[1]

@pytest.mark.slow
def test_every_notebook_becomes_a_page_without_a_warning(monkeypatch):
    from nbdev.config import get_config, nbpath2html
    from nbdev.process import NBProcessor
    from nbdev.processors import FilterDefaults
    monkeypatch.chdir(REPO / 'nbs')
    assert get_config().skip_procs                    # the site shows the notebooks as stored (pyproject says why)
    names = sorted(p.name for p in Path('.').glob('*.ipynb'))
    assert 'index.ipynb' in names and len(names) > 30
    bad, pages = {}, {}
    for n in names:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            try: proc = NBProcessor(n, FilterDefaults().procs(), process=True)
            except Exception as e:
                bad[n] = f"{type(e).__name__}: {str(e).splitlines()[0]}"; continue
        fm = getattr(proc.nb, 'frontmatter_', {})
        if w: bad[n] = '; '.join(sorted({str(x.message).splitlines()[0] for x in w}))
        elif not fm.get('title') or fm.get('output-file') != nbpath2html(Path(n)).name: bad[n] = f"no page: {fm}"
        else: pages[n] = fm['output-file']
    assert not bad, bad
    assert len(set(pages.values())) == len(names), pages          # one page each

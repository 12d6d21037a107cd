"""The README as a newcomer meets it: its sections, its length, every number it states checked against the results file it
comes from, and the same text as the docs site's home page (nbs/index.ipynb).

The README is held equal to index.ipynb by a test, not generated from it by `nbdev-readme`: the README must read whole
on a code host without a build step and stay within 120 lines, while the home page also lists every notebook and
console script; `nbdev-readme` needs quarto at every commit. So every README section is, word for word, a markdown
cell of index.ipynb (links rebased from the repository root to nbs/), and index.ipynb adds its own sections."""
import json, re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / 'README.md').read_text()
RES = REPO / 'bench' / 'results'

def sections(text: str) -> dict:
    "The README's `## ` sections, heading -> body."
    parts = re.split(r'(?m)^## ', text)
    return {p.split('\n', 1)[0].strip(): p.split('\n', 1)[1].strip() for p in parts[1:]}

def test_readme_has_its_sections_and_stays_short():
    "Results, Paper scale, Citation and License, among the anchors' sections, in that order; at most 120 lines."
    s = list(sections(README))
    assert s == ['Two commands', 'Results', 'Paper scale as it stands', 'Your data', 'UniMatch V2', 'Where to go next',
                 'Citation', 'License'], s
    assert len(README.splitlines()) <= 120 and README.startswith('# ael_nb\n')
    assert '](tools/screenshots/' in README.split('## ')[0]            # the picture, before the commands

def test_readme_keeps_the_two_commands():
    "The two commands, exactly as CI runs them (.ci/run: the install step, then the tests)."
    cmds = ["python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[dev]' && python -m ipykernel install "
            "--sys-prefix --display-name python3 && ael-train", 'nbdev-test && pytest']
    assert f"```sh\n{cmds[0]}\n{cmds[1]}\n```" in README

def test_readme_excerpt_is_what_the_default_run_printed():
    "Every line of the README's excerpt is a line the timed default run printed (its stored ael-train.log)."
    block = README.split('```text\n', 1)[1].split('\n```', 1)[0].splitlines()
    log = (RES / 'timed-default-run-avx2-zen4' / 'ael-train.log').read_text().splitlines()
    assert len(block) >= 4 and all(line in log for line in block), [l for l in block if l not in log]

def draws_row(path: str, e: dict) -> str:
    "The README's Results row of one path, up to its time cell, from default_draws.json."
    rng = lambda m: f"{min(e[m]):.1f}-{max(e[m]):.1f} ({len(e[m])} draws)"
    g = e['paired']['1']
    share = (f"{100 * e['criteria']['gap_share']:.0f} %" if e['criteria']['gap_share'] is not None
             else f"not computed: {e['criteria'].get('gap_share_not_computed') or 'no fully-labeled draw on this path'}")
    return (f"| `{path}` | {rng('supervised')} | {rng('ael')} | {g['tail']['mean']:+.1f} ± {g['tail']['sd']:.1f} over "
            f"{len(g['seeds'])} seeds (1 thread) | {share} | ")

def test_readme_results_rows_come_from_the_stored_draws():
    "One table row per path that holds draws of the default, each the stored draws' ranges, paired gain and gap share; "
    "a path's time is a measured one (the timed run's, on its CPU) or says it was not timed alone."
    stored = json.loads((RES / 'default_draws.json').read_text())['paths']
    rows = [l for l in README.splitlines() if l.startswith('| `')]
    rows = sorted(rows, key=lambda r: not r.startswith('| `avx2-fp32`'))     # the timed path's row
    paths = [p for p, e in stored.items() if e['ael'] and e['supervised']]
    assert len(rows) == len(paths) and 'avx2-fp32' in paths
    for p in paths:
        (row,) = [r for r in rows if r.startswith(f"| `{p}` |")]
        assert row.startswith(draws_row(p, stored[p])), (row, draws_row(p, stored[p]))
        timed = sorted(RES.glob(f"timed-default-run-{p.split('-')[0]}-*"))
        assert timed or row.endswith('| not timed alone |'), row
    s = json.loads((RES / 'timed-default-run-avx2-zen4' / 'summary.json').read_text())
    assert 'AMD EPYC' in s['device_name'] and 'AVX2' in s['device_name']
    assert f"training {round(s['time_s'])} s" in rows[0] and 'on a 2-core AMD EPYC (Zen 4 class) capped to AVX2' in rows[0]
    ab = {n: json.loads((RES / 'timed-ab-avx2-xeon' / f'{n}_summary.json').read_text()) for n in ('default', 'paper-sources')}
    assert all(x['path'] == 'avx2-fp32' and 'Xeon' in x['device_name'] and 'AVX2' in x['device_name'] for x in ab.values())
    assert ab['default']['weights'] == s['weights']                          # the same training as the Zen 4's
    m, sec = divmod(round(ab['default']['time_s']), 60)
    assert (f"{round(ab['default']['time_s'])} s ({m} min {sec} s) on a 2-core Intel Xeon with AMX capped the same way, "
            f"where the paper's sources took {round(ab['paper-sources']['time_s'])} s") in rows[0]
    assert all(stored[p]['criteria']['every_ael_above'] and stored[p]['criteria']['every_class_above'] for p in paths)   # the words under it

def test_readme_citation_matches_citation_cff():
    "The BibTeX entry of the paper and CITATION.cff name the same title and authors; LICENSE is the Apache-2.0 text."
    cff = (REPO / 'CITATION.cff').read_text()
    title = 'Semi-Supervised Semantic Segmentation via Adaptive Equalization Learning'
    assert f"title     = {{{title}}}" in README and f'title: "{title}"' in cff
    for first, last in (('Hanzhe', 'Hu'), ('Fangyun', 'Wei'), ('Han', 'Hu'), ('Qiwei', 'Ye'), ('Jinshi', 'Cui'), ('Liwei', 'Wang')):
        assert f"{last}, {first}" in README and f'family-names: "{last}"\n        given-names: "{first}"' in cff
    lic = (REPO / 'LICENSE').read_text()
    assert 'Apache License' in lic and 'Version 2.0, January 2004' in lic and 'END OF TERMS AND CONDITIONS' in lic
    assert 'license = "Apache-2.0"' in (REPO / 'pyproject.toml').read_text() and 'license: Apache-2.0' in cff

def index_markdown() -> str:
    nb = json.loads((REPO / 'nbs' / 'index.ipynb').read_text())
    return '\n\n'.join(''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'markdown')

def rebase(text: str) -> str:
    "A README section's links as they read from nbs/ (the docs site's home page)."
    return re.sub(r'\]\((?!https?:|#)', '](../', text)

def test_index_holds_the_readme():
    "Every README section is, word for word, in index.ipynb's markdown (links rebased to nbs/)."
    md = index_markdown()
    missing = [h for h, body in sections(README).items() if f"## {h}\n\n{rebase(body)}" not in md]
    assert not missing, missing

def test_index_names_every_notebook_and_console_script():
    "The home page lists every notebook, the user notebooks first, and every console script pyproject declares."
    md = index_markdown()
    nbs = sorted(p.stem for p in (REPO / 'nbs').glob('[0-9]*.ipynb'))
    assert not [n for n in nbs if f"[{n}]({n}.ipynb)" not in md], [n for n in nbs if f"[{n}]({n}.ipynb)" not in md]
    order = [md.index(f"[{n}]({n}.ipynb)") for n in ('22_step_through', '28_your_data', '24_compare', '25_launch', '00_core')]
    assert order == sorted(order)
    engine = [md.index(f"[{n}]({n}.ipynb)") for n in nbs if n not in ('22_step_through', '28_your_data', '24_compare', '25_launch')]
    assert engine == sorted(engine)                                   # then the engine, in order
    scripts = re.findall(r'^(ael-[a-z]+) = ', (REPO / 'pyproject.toml').read_text(), re.M)
    assert len(scripts) == 6 and all(f"`{s}`" in md for s in scripts), scripts
    assert 'python -m ipykernel install --sys-prefix --display-name python3' in md

def test_docs_site_has_every_notebook():
    "The docs site's settings: every notebook a page of the sidebar (index first, then the user notebooks, then the "
    "engine in order), the site written to _docs/, quarto from the `docs` extra."
    import yaml
    side = yaml.safe_load((REPO / 'nbs' / 'sidebar.yml').read_text())['website']['sidebar']['contents']
    pages = [side[0]] + [n for s in side[1:] for n in s['contents']]
    nbs = sorted(p.name for p in (REPO / 'nbs').glob('[0-9]*.ipynb'))
    assert pages[0] == 'index.ipynb' and sorted(pages[1:]) == nbs and len(pages) == len(set(pages))
    assert pages[1:5] == ['22_step_through.ipynb', '28_your_data.ipynb', '24_compare.ipynb', '25_launch.ipynb']
    assert pages[5:] == [n for n in nbs if n not in pages[1:5]]
    quarto = yaml.safe_load((REPO / 'nbs' / '_quarto.yml').read_text())
    assert quarto['metadata-files'] == ['nbdev.yml', 'sidebar.yml'] and (REPO / 'nbs' / quarto['format']['html']['css']).is_file()
    assert yaml.safe_load((REPO / 'nbs' / 'nbdev.yml').read_text())['project']['output-dir'] == '_docs'
    py = (REPO / 'pyproject.toml').read_text()
    assert 'docs = ["nbdev>=3", "quarto-cli"]' in py and 'custom_sidebar = true' in py
    assert 'nbdev-docs' in (REPO / '.ci' / 'run').read_text()


def test_readme_amx_row_is_its_timed_run():
    "The AMX row's time and tail are the timed AMX run's, which is the stored 2-thread seed-0 AEL draw of that path."
    run = RES / 'timed-default-run-amx-xeon'
    s = json.loads((run / 'summary.json').read_text())
    draw = json.loads((RES / 'sixteenth-val400-amxbf16-xeon' / 'ael_memory_s0_2threads.json').read_text())
    assert (s['path'], s['threads'], s['weights'], s['teacher_weights']) == ('amx-bf16', 2, draw['weights'], draw['teacher_weights'])
    tail = round(100 * draw['metrics']['teacher']['tail_miou'], 1)
    m, sec = divmod(round(s['time_s']), 60)
    (row,) = [l for l in README.splitlines() if l.startswith('| `amx-bf16` |')]
    assert row.endswith(f"| training {round(s['time_s'])} s ({m} min {sec} s), tail mIoU {tail:.1f} on the 400 val scenes, "
                        "on a 2-core Intel Xeon with AMX (Sapphire Rapids class) |")
    text = ' '.join((run / 'README.md').read_text().split())
    est = next(l for l in (run / 'ael-train.log').read_text().splitlines() if 's a step here' in l).split(':')[0]
    assert f"1600 steps trained in {round(s['time_s'])} s ({m} min {sec} s)" in text and f'"{est}' in text

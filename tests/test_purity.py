"""The product speaks only of itself: the README, docs/, the notebooks, bench/ (its work logs in bench/notes/ aside) and the
package name no issue of this project, tell no work log, say nothing of how machines were lent while the kit was built,
and name no path of anyone's machine nor anything beside the checkout (`../shared`). History lives in CHANGELOG.md and
bench/notes/. External references ("U2PL issue 30", "UniMatch #72") are fine."""
import json, re
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parents[1]
EXTERNAL = ('U2PL', 'UniMatch', 'SemiSeg', 'AEL authors', "authors' repo", 'pytorch', 'torch', 'nbdev', 'quarto', 'fastcore',
            'DINOv2', 'timm', 'torchvision', 'github.com', 'CPython', 'oneDNN')
RULES = {
    'an issue number of this project': re.compile(r'(?i)\b(?:issues?|PRs?|pull requests?)[\s-]+#?\d+'),
    'a work-log heading or word': re.compile(r"(?im)^\s*#+\s*sessions?\s+of\b|\bsessions?\s+(?:of\s+20|\d)|\bsession's\b|\b(?:another|"
                                            r"this|that|earlier|later|GPU|device|afternoon|morning|evening|night|first|second|"
                                            r"third|last)\s+sessions?\b"),
    'how GPU time was lent': re.compile(r'(?i)\blent\b|\blend(?:s|ing)?\b|\bloan(?:ed|s)?\b|\bdevice tool\b|\bwhen a GPU\b.{0,20}\bavailable\b'),
    "a path of someone's machine": re.compile(r'(?<![\w.~-])/(?:work|root|home|Users|mnt|scratch)/[\w.-]'),
    'a path beside the checkout': re.compile(r'\.\./shared\b'),
    'a dated story': re.compile(r'(?i)\b(?:since|until|before|after|as of)\s+20\d\d-\d\d-\d\d'),
    'internal jargon': re.compile(r"(?i)\bthe contract'?s?\b"),
}

def product_files():
    "Every text file of the product: README, docs/, nbs/, bench/ but its work logs (bench/notes/), ael_nb/."
    yield REPO / 'README.md'
    for top, exts in (('docs', ('.md', '.qmd')), ('nbs', ('.ipynb', '.md', '.qmd', '.yml', '.css')),
                      ('bench', ('.md', '.py', '.sh')), ('ael_nb', ('.py',))):
        for p in sorted((REPO / top).rglob('*')):
            rel = p.relative_to(REPO).parts
            if p.suffix in exts and p.is_file() and 'notes' not in rel[:2] and '_work' not in rel and '_proc' not in rel:
                yield p

def text_of(p: Path) -> str:
    "A notebook's cells, sources and outputs, as lines; any other file as it is."
    if p.suffix != '.ipynb': return p.read_text()
    nb, out = json.loads(p.read_text()), []
    for c in nb['cells']:
        out.append(''.join(c['source']))
        for o in c.get('outputs', []):
            out.append(''.join(o.get('text', '')) + ''.join(o.get('data', {}).get('text/plain', '')) + ''.join(o.get('data', {}).get('text/markdown', '')))
    return '\n'.join(out)

def offences(text: str) -> list[str]:
    "What `text` says that a product file must not: (rule, the line's words around it)."
    out = []
    for rule, rx in RULES.items():
        for m in rx.finditer(text):
            before = text[max(0, m.start() - 40):m.start()]
            if rule == 'an issue number of this project' and any(e.lower() in before.lower() for e in EXTERNAL): continue
            out.append(f"{rule}: ...{text[max(0, m.start() - 30):m.end() + 30]!r}")
    return out

def test_the_rules_catch_what_they_name():
    "Each rule, on a line that breaks it and on one that does not."
    bad = ["until issue 45 took a sixteenth", "## Session of 2026-11-29, afternoon", "while a GPU was lent",
           "see /work/shared/x.md", "cites ../shared/reference/ael-reference-notes.md", "the default since 2026-11-29",
           "the contract's default", "issues 39, 38", "The issue-39 layout", "measured by another session", "GPU session 3"]
    good = ["U2PL issue 30 says", "UniMatch #72", "the default run", "under /tmp/ael_runs", "equivalent silently",
            "results/floor_cuda_h200_paper_2026-11-28.json", "a sessile pole", "in a session of its own", "--data-root /data/cityscapes"]
    for line in bad: assert offences(line), line
    for line in good: assert not offences(line), (line, offences(line))

def test_the_product_speaks_only_of_itself():
    "No product file names an issue of this project, a work log, lent machines, a machine's path or `../shared`."
    files = list(product_files())
    assert REPO / 'README.md' in files and REPO / 'nbs' / 'index.ipynb' in files and REPO / 'bench' / 'README.md' in files
    assert not any('notes' in p.relative_to(REPO).parts for p in files)
    found = [f"{p.relative_to(REPO)}: {o}" for p in files for o in offences(text_of(p))]
    assert not found, '\n'.join(found)

def test_the_readme_has_no_date():
    "The README names no date at all (the history is CHANGELOG.md's)."
    text = (REPO / 'README.md').read_text()
    assert not re.search(r'\b20\d\d-\d\d-\d\d\b', text), re.findall(r'.{30}20\d\d-\d\d-\d\d.{10}', text)

def test_bench_readme_lists_every_script():
    "bench/README names every script a user runs (bench/) and every one-off experiment (bench/experiments/)."
    text = (REPO / 'bench' / 'README.md').read_text()
    missing = [p.name for p in sorted((REPO / 'bench').glob('*')) if p.suffix in ('.py', '.sh') and f"`{p.name}`" not in text and f"(`{p.name}`)" not in text]
    missing += [p.name for p in sorted((REPO / 'bench' / 'experiments').glob('*.py')) if f"`experiments/{p.name}`" not in text]
    assert not missing, missing

def test_results_index_names_every_entry():
    "bench/results/README.md names every folder and file stem of bench/results (a folder's files and a grid's tables by their stem)."
    text = (REPO / 'bench' / 'results' / 'README.md').read_text()
    stems = {p.name.split('.')[0] for p in (REPO / 'bench' / 'results').iterdir() if p.name != 'README.md'}
    stems = {re.sub(r'_(per_class|gap|curves|1-\d+_per_class)$', '', s) for s in stems}
    missing = sorted(s for s in stems if f"`{s}" not in text)
    assert not missing, missing

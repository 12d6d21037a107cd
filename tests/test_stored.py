"""The package's copy of what it reads at run time (`ael_nb/stored/`, `ael_nb.draws.STORED`) is what `bench/stored.py`
generates from `bench/results`, the evidence; the package reads only that copy, never the checkout's bench/."""
import json, re, shutil, sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'bench'))
import stored   # bench/stored.py

def test_the_package_copy_is_what_bench_results_gives():
    "Every stored draw, step time and GPU report of bench/results is in ael_nb/stored/ with the same values, and nothing else."
    from ael_nb.draws import STORED, read_stored
    assert stored.differences() == [], 'run python bench/stored.py'
    names = {p.relative_to(STORED).as_posix() for p in STORED.rglob('*') if p.is_file()}
    assert {'sixteenth-val400-amxbf16-xeon/ael_s0_2threads.json', 'default-run-cpu-avx2/summary.json', 'default-run-cpu-avx2/config.yaml',
            'folder_step_cpu_avx2.json', 'paper_scale_cuda_h200_2026-11-28.json'} <= names
    for n in names:                                     # the same values as the evidence, written compact
        if n.endswith('.json'): assert json.loads((STORED / n).read_text()) == json.loads((REPO / 'bench' / 'results' / n).read_text()), n
    assert read_stored(STORED / 'sixteenth-val400-amxbf16-xeon' / 'ael_s0_2threads.json')['path'] == 'amx-bf16'

def test_a_changed_result_reaches_the_copy(tmp_path):
    "A new, changed or removed result under the results folder is a difference until `write_stored` rewrites the copy."
    res, to = tmp_path / 'results', tmp_path / 'stored'
    for f in ('sixteenth-val400-amxbf16-xeon/ael_s0_2threads.json', 'sixteenth-val400-amxbf16-xeon/README.md', 'folder_step_cpu_avx2.json',
              'default-run-cpu-avx2/summary.json', 'default-run-cpu-avx2/config.yaml', 'default-run-cpu-avx2/metrics.jsonl',
              'default-run-cpu-avx2/per_class.md', 'floor_cpu_small.json'):
        (res / f).parent.mkdir(parents=True, exist_ok=True); shutil.copy(REPO / 'bench' / 'results' / f, res / f)
    assert stored.write_stored(res, to) == stored.differences(res, tmp_path / 'empty') == sorted(
        ['default-run-cpu-avx2/config.yaml', 'default-run-cpu-avx2/metrics.jsonl', 'default-run-cpu-avx2/summary.json',
         'folder_step_cpu_avx2.json', 'sixteenth-val400-amxbf16-xeon/ael_s0_2threads.json'])   # no README, no floor report
    assert stored.differences(res, to) == []
    cell = res / 'sixteenth-val400-amxbf16-xeon' / 'ael_s0_2threads.json'
    d = json.loads(cell.read_text()); d['metrics']['teacher']['tail_miou'] = 0.3; cell.write_text(json.dumps(d))
    assert stored.differences(res, to) == ['sixteenth-val400-amxbf16-xeon/ael_s0_2threads.json']
    (res / 'folder_step_cpu_avx2.json').unlink()
    assert stored.write_stored(res, to) == ['folder_step_cpu_avx2.json', 'sixteenth-val400-amxbf16-xeon/ael_s0_2threads.json']
    assert not (to / 'folder_step_cpu_avx2.json').exists() and json.loads((to / 'sixteenth-val400-amxbf16-xeon' / 'ael_s0_2threads.json').read_text()) == d

def test_nothing_in_the_package_reads_the_checkout():
    "No module of ael_nb finds files through the checkout around it (`Path(ael_nb.__file__).parents[1] / 'bench'`)."
    for p in sorted((REPO / 'ael_nb').glob('*.py')):
        text = p.read_text()
        assert not re.search(r"parents\[1\]|parent\.parent|/ 'bench'", text), p.name

def test_the_summary_reads_the_package_copy(tmp_path):
    "By default the closing summary reads the package's copy and says what it says from bench/results (the stored AMX "
    "draw as a run folder, placed among the AMX draws)."
    from ael_nb.config import from_dict, save_config, upgrade_config
    from ael_nb.draws import STORED, closing_summary
    cell = json.loads((STORED / 'sixteenth-val400-amxbf16-xeon' / 'ael_s0_2threads.json').read_text())
    run = tmp_path / 'amx'; run.mkdir()
    save_config(from_dict(upgrade_config(cell['config'])), run / 'config.yaml')
    (run / 'summary.json').write_text(json.dumps(dict(cell, last=cell['metrics'], run_dir=str(run))))
    (run / 'metrics.jsonl').write_text(json.dumps(dict(it=cell['it'], eval=cell['metrics'])) + '\n')
    here, there = closing_summary(run), closing_summary(run, REPO / 'bench' / 'results')
    assert str(STORED) in here and 'bench/results' not in here
    assert here.replace(str(STORED), '<stored>') == there.replace(str(REPO / 'bench' / 'results'), '<stored>')
    assert 'stored draws of this setting on amx-bf16' in here

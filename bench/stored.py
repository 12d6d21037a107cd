"""The package's copy of what `ael_nb` reads at run time, generated from `bench/results` (the evidence stays there):

    python bench/stored.py            # rewrites ael_nb/stored/ from bench/results
    python bench/stored.py --check    # exit 1, naming the files, where ael_nb/stored/ is not what bench/results gives

`ael_nb/stored/` is a results folder in bench/results' layout holding only what the package reads: every stored draw
(`ael_nb.draws.read_stored`: a grid or store_run cell, and a whole run folder's `summary.json`, `config.yaml` and
`metrics.jsonl`) for `ael-train`'s closing summary, the step times `<preset>_step_*.json` (`bench/folder_step.py`) for
its time estimate, and the GPU reports `paper_scale*.json` for `ael_nb.arithmetic.measured_speed`. JSON is written
compact (the same values); other files as they are. `bench/draws.py`, `bench/store_run.py`, `bench/grid.py`,
`bench/folder_step.py` and `bench/fold_gpu.py` call `write_stored` after writing into bench/results, and the wheel
ships the folder (pyproject's package data), so an installed kit reads what a checkout reads."""
from __future__ import annotations
import argparse, json, sys
from pathlib import Path
from ael_nb.draws import STORED, read_stored

RESULTS = Path(__file__).resolve().parent / 'results'
RUN_FILES = ('summary.json', 'config.yaml', 'metrics.jsonl')   # what a run folder's draw is read from

def _compact(p: Path) -> bytes: return (json.dumps(json.loads(p.read_text()), separators=(',', ':')) + '\n').encode()

def wanted(results=RESULTS) -> dict[str, bytes]:
    "The package copy of `results`: relative path -> content."
    results, out = Path(results), {}
    for p in sorted(results.glob('*/*.json')):
        if read_stored(p) is None: continue
        if p.name == 'summary.json':
            for f in RUN_FILES:
                if (p.parent / f).is_file(): out[f'{p.parent.name}/{f}'] = _compact(p.parent / f) if f.endswith('.json') else (p.parent / f).read_bytes()
        else: out[f'{p.parent.name}/{p.name}'] = _compact(p)
    for p in sorted(results.glob('*_step_*.json')) + sorted(results.glob('paper_scale*.json')): out[p.name] = _compact(p)
    return out

def differences(results=RESULTS, to=STORED) -> list[str]:
    "What `to` lacks, holds beyond, or holds otherwise than `wanted(results)`: relative paths, sorted."
    want, to = wanted(results), Path(to)
    have = {p.relative_to(to).as_posix() for p in to.rglob('*') if p.is_file()}
    return sorted((set(want) ^ have) | {k for k in set(want) & have if (to / k).read_bytes() != want[k]})

def write_stored(results=RESULTS, to=STORED) -> list[str]:
    "Rewrite `to` as `wanted(results)` (files it no longer wants removed); the relative paths that changed."
    want, to = wanted(results), Path(to)
    changed = differences(results, to)
    for k in changed:
        f = to / k
        if k in want:
            f.parent.mkdir(parents=True, exist_ok=True); tmp = f.with_name(f.name + '.tmp')
            tmp.write_bytes(want[k]); tmp.replace(f)                  # atomic: a reader sees the old file or the new
        else: f.unlink()
    for d in sorted((d for d in to.rglob('*') if d.is_dir()), reverse=True):
        if not any(d.iterdir()): d.rmdir()
    return changed

def refresh(results) -> None:
    "After a bench script wrote into `results`: where that is bench/results, bring the package copy up to date (and say so)."
    if Path(results).resolve() != RESULTS: return              # results written elsewhere: not the evidence the package ships
    changed = write_stored()
    if changed: print(f"ael_nb/stored/: {len(changed)} files updated from bench/results (bench/stored.py)")

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('--check', action='store_true', help='change nothing; exit 1 naming the files that differ')
    args = ap.parse_args(argv)
    if args.check:
        diff = differences()
        if diff: sys.exit(f"ael_nb/stored/ differs from bench/results in {len(diff)} files (run python bench/stored.py): " + ', '.join(diff[:10]))
        print('ael_nb/stored/ is what bench/results gives'); return
    changed = write_stored()
    print(f"ael_nb/stored/: {len(changed)} files changed" + (f" ({', '.join(changed[:10])}{', ...' if len(changed) > 10 else ''})" if changed else ''))

if __name__ == '__main__': main()

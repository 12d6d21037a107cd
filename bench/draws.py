"""The `cpu` preset's stored draws, path by path: `bench/results/default_draws.json`.

    python bench/draws.py                  # writes bench/results/default_draws.json (and ael_nb/stored/), prints a line per path and RESULTS' tables
    python bench/draws.py --results DIR    # the draws stored under another folder (written there)
    python bench/draws.py --fraction 1/4 --set method.cp_source=batch method.acm_fallback=box
                                           # the earlier default: a quarter labeled, the paper's ACP and ACM sources (draws_1-4.json)
    python bench/draws.py --set method.cp_source=batch method.acm_fallback=box --name draws_1-16_batch.json
                                           # a sixteenth labeled with the paper's sources (draws_1-16_batch.json)

A draw is one stored result at the `cpu` preset's setting (`ael_nb.draws.setting_of`; an AEL draw also with the preset's
`method.*` keys, so a screened candidate is no draw of the default, and at its labeled share): grid `cheaper`'s rows that resolve
to it (`tests/test_bench.py::test_cpu_rows_are_the_cpu_preset`), any other cell at that setting, and the default runs'
folders (`bench/results/default-run-cpu-*/`), read by `ael_nb.draws.stored_draws`, the reader `ael-train`'s closing
summary uses. A result repeats to the digit given its instruction path, thread count and torch version: each draw's
path and thread count are the ones it recorded, or `ael_nb.draws.provenance`'s inference from what it recorded (listed
under the draw's `inferred`); a result whose path nothing decides is listed under `unknown_path`, never guessed.
Tail mIoU, mIoU and per-class IoU (`per_class`) in %, of the reported model (the EMA teacher where the method has one,
as `ael-train` reports it). Draws measured elsewhere and folded in (`bench/results/avx512bf16-draws-2026-11-28/`, each
with its `measured` provenance; `bench/results/sixteenth-val400-amxbf16-xeon/`, cells as measured, its README their
provenance) hold only what was measured: a figure they lack is null (`miou`, a class of
`per_class`, or `per_class` itself), and the paired mIoU gain is over the pairs that hold both."""
from __future__ import annotations
import argparse, json
from fractions import Fraction
from pathlib import Path
import numpy as np
from ael_nb.draws import setting_of, stored_draws
from ael_nb.config import flat_settings, get_config, to_dict
from ael_nb.core import atomic_write_text
from ael_nb.synthetic import SYNTHETIC_INFO
from stored import refresh

RESULTS = Path(__file__).resolve().parent / 'results'
METHODS = ('supervised', 'ael', 'full')
PAPER_SOURCES = ('method.cp_source=batch', 'method.acm_fallback=box')   # ACP and ACM as the paper: the earlier defaults' draws

def _mean_sd(x) -> dict|None:
    x = np.array(x, dtype=float)
    if not len(x): return None
    return dict(mean=round(float(x.mean()), 4), sd=round(float(x.std(ddof=1)), 4) if len(x) > 1 else None)

def _r(v): return None if v is None else round(v, 4)

def over(g: dict) -> str:
    "' over 3 seeds', or ' over 3 seeds (5 pairs)' where a seed has draws from more than one machine."
    k = len(set(g['seeds']))
    return f" over {k} seed{'s' * (k > 1)}" + (f" ({g['n']} pairs)" if g['n'] != k else '')

def paired(draws: list[dict]) -> dict:
    "AEL minus supervised of the same seed and split, per thread count (one path's draws): tail and mIoU gains, mean and sd."
    out = {}
    for t in sorted({d['threads'] for d in draws}):
        pairs = [(a, s) for a in draws for s in draws if a['method'] == 'ael' and s['method'] == 'supervised'
                 and a['threads'] == s['threads'] == t and (a['seed'], a['split']) == (s['seed'], s['split'])]
        if pairs: out[str(t)] = dict(n=len(pairs), seeds=[a['seed'] for a, _ in pairs],
                                     tail=_mean_sd([a['tail'] - s['tail'] for a, s in pairs]),
                                     miou=_mean_sd([a['miou'] - s['miou'] for a, s in pairs if None not in (a['miou'], s['miou'])]))
    return out

def criteria(e: dict) -> dict:
    "The default's tests of one path's draws: AEL above supervised draw by draw, no tail class of AEL's mean more than 2 points "
    "below supervised's (and every one above it), AEL's mean share of the supervised-to-fully-labeled tail gap (null where a "
    "side has no draw, `gap_share_not_computed` saying why); seed by seed, each tail class's worst AEL-minus-supervised pair."
    tail = [SYNTHETIC_INFO.class_names[c] for c in SYNTHETIC_INFO.tail_classes]
    mean = lambda m, c: _mean_sd([d['per_class'][c] for d in e['draws'] if d['method'] == m and d['per_class']
                                  and d['per_class'].get(c) is not None] or [])
    gains = {c: round(mean('ael', c)['mean'] - mean('supervised', c)['mean'], 4) if mean('ael', c) and mean('supervised', c) else None
             for c in tail}
    m = {k: float(np.mean(e[k])) if e[k] else None for k in METHODS}
    share = (m['ael'] - m['supervised']) / (m['full'] - m['supervised']) if None not in m.values() and m['full'] > m['supervised'] else None
    # a side without a draw leaves the share uncomputed, and says why (never a share from another path's ceiling)
    why = (None if share is not None else f"no {', no '.join(k if k != 'full' else 'fully-labeled' for k in METHODS if m[k] is None)} draw on this path"
           if None in m.values() else 'the fully-labeled draws are not above the supervised ones')
    # seed by seed: AEL's tail class minus supervised's of the same seed, split and thread count, the worst pair per class
    pairs = [(a, s) for a in e['draws'] for s in e['draws'] if a['method'] == 'ael' and s['method'] == 'supervised'
             and (a.get('seed'), a.get('threads')) == (s.get('seed'), s.get('threads')) and a['per_class'] and s['per_class']]
    worst = {c: round(min(a['per_class'][c] - s['per_class'][c] for a, s in pairs), 4) if pairs else None for c in tail}
    return dict(every_ael_above=min(e['ael']) > max(e['supervised']) if e['ael'] and e['supervised'] else None,
                tail_class_gain=gains, no_class_below_2=all(g >= -2 for g in gains.values()) if None not in gains.values() else None,
                every_class_above=all(g > 0 for g in gains.values()) if None not in gains.values() else None,
                worst_pair=worst, no_pair_below_2=all(w >= -2 for w in worst.values()) if None not in worst.values() else None,
                gap_share=_r(share), gap_share_half=None if share is None else share >= 0.5, gap_share_not_computed=why,
                counts={k: len(e[k]) for k in METHODS})

def default_draws(results: Path, fraction: str|None = None, overrides=()) -> dict:
    "The draws at the `cpu` preset's setting under `results`, path by path, in the shape the README and the summary read; "
    "`fraction` ('1/4') and `overrides` (['method.cp_source=batch']): the same setting with those changes (a candidate, or an earlier default)."
    cfg = get_config('cpu', overrides=list(overrides))
    want = setting_of(to_dict(cfg))
    share = str(Fraction(fraction or cfg.data.fraction).limit_denominator(1000)).replace('/', '-')
    ael = {k: v for k, v in flat_settings(cfg).items() if k.startswith('method.')}
    # an AEL cell with a method switch of its own (a screened candidate) is another method, not a draw of the default
    # and a cell at another labeled share (its split's name, '1-4' of '1-4_fold0') is another setting; the ceiling has all labels
    at = [d for d in stored_draws(results) if d['setting'] == want and d['method'] in METHODS
          and (d['labeled'] == share or d['method'] == 'full')
          and (d['method'] != 'ael' or d['method_keys'] == ael)]
    rel = lambda d: Path(d['where']).relative_to(results.resolve()).as_posix() if Path(d['where']).is_relative_to(results.resolve()) else d['where']
    paths = {}
    for p in sorted({d['path'] for d in at if d['path']}):
        mine = sorted((d for d in at if d['path'] == p), key=lambda d: (d['threads'], d['seed'], d['method']))
        paths[p] = {m: [round(d['tail'], 4) for d in mine if d['method'] == m] for m in METHODS} | dict(
            threads=sorted({d['threads'] for d in mine}), paired=paired(mine),
            draws=[dict(method=d['method'], seed=d['seed'], threads=d['threads'], torch=d['torch'], tail=round(d['tail'], 4),
                        miou=_r(d['miou']), per_class=d['per_class'] and {c: _r(v) for c, v in d['per_class'].items()},
                        source=rel(d), inferred=d['inferred']) for d in mine])
    for e in paths.values(): e['criteria'] = criteria(e)
    return dict(setting="the cpu preset's (ael-train's default run)" + (f", {fraction} labeled" if fraction else '')
                + (f", with {' '.join(overrides)}" if overrides else ''),
                tail='tail mIoU, %', paths=paths,
                unknown_path=[rel(d) for d in at if not d['path']])

def pairs_table(e: dict) -> str:
    "One path's draws as RESULTS shows them: a row per thread count and seed, supervised and AEL tail mIoU and each tail class."
    tail = [SYNTHETIC_INFO.class_names[c] for c in SYNTHETIC_INFO.tail_classes]
    f = lambda v: '-' if v is None else f"{v:.1f}"
    rows = ['| threads | seed | supervised tail | AEL tail | AEL - supervised | ' + ' | '.join(f"{c} (sup / AEL)" for c in tail) + ' |',
            '|---' * (5 + len(tail)) + '|']
    for t, seed in sorted({(d['threads'], d['seed']) for d in e['draws'] if d['method'] != 'full'}):
        got = {m: [d for d in e['draws'] if (d['threads'], d['seed'], d['method']) == (t, seed, m)] for m in ('supervised', 'ael')}
        s, a = got['supervised'], got['ael']                      # two draws of one seed: two machines (both shown)
        gain = f"{a[0]['tail'] - s[0]['tail']:+.1f}" if len(s) == len(a) == 1 else '-'
        vals = lambda ds, c=None: ', '.join(f(d['tail'] if c is None else (d['per_class'] or {}).get(c)) for d in ds) or '-'
        rows.append(f"| {t} | {seed} | {vals(s)} | {vals(a)} | {gain} | " + ' | '.join(f"{vals(s, c)} / {vals(a, c)}" for c in tail) + ' |')
    return '\n'.join(rows)

def readme_sentences(draws: dict) -> str:
    "One line per path on the default run's draws (the figures of the README's Results table), from `default_draws.json`."
    out = []
    for p, e in draws['paths'].items():
        rng = lambda m: ('none stored' if not e[m] else f"{e[m][0]:.1f} (1 draw)" if len(e[m]) == 1 else
                         f"{min(e[m]):.1f}-{max(e[m]):.1f} ({len(e[m])} draws)")
        gain = '; '.join(f"paired gain at {t} thread{'s' * (t != '1')} {g['tail']['mean']:+.1f}" +
                         (f" ± {g['tail']['sd']:.1f}" if g['tail']['sd'] is not None else '') + over(g)
                         for t, g in e['paired'].items())
        above = ('every AEL draw above every supervised one' if min(e['ael']) > max(e['supervised']) else
                 "the lowest AEL draw below the highest supervised one: AEL's gain is not larger than the spread of a draw"
                 ) if e['ael'] and e['supervised'] else 'nothing to compare'
        c = e['criteria']
        cls = ', '.join(f"{k} {g:+.1f}" for k, g in c['tail_class_gain'].items() if g is not None)
        share = (f"{100 * c['gap_share']:.0f} % of the gap to fully labeled" if c['gap_share'] is not None else
                 f"{c['gap_share_not_computed']}: the gap share is not computed")
        out.append(f"{p}: supervised {rng('supervised')}, AEL {rng('ael')}" + (f", {gain}" if gain else '') + f"; {above}"
                   + (f"; tail classes, AEL - supervised means: {cls}" if cls else '') + f"; {share}.")
    return '\n'.join(out)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('--results', default=str(RESULTS), help='folder of stored results (default bench/results); the file is written there')
    ap.add_argument('--fraction', default=None, help="another labeled share (e.g. 1/4): writes draws_1-4.json, prints its tables")
    ap.add_argument('--set', nargs='+', default=[], metavar='KEY=VALUE', help="the preset's setting with these changes")
    ap.add_argument('--name', default=None, help='the file to write (default: default_draws.json, or draws_<fraction>.json)')
    args = ap.parse_args(argv)
    d = default_draws(Path(args.results), args.fraction, tuple(args.set))
    name = args.name or (f"draws_{args.fraction.replace('/', '-')}.json" if args.fraction else 'default_draws.json')
    atomic_write_text(Path(args.results) / name, json.dumps(d, indent=1) + '\n')
    refresh(args.results)
    print(readme_sentences(d))
    print('\n\n'.join(f"{p}\n{pairs_table(e)}" for p, e in d['paths'].items()))

if __name__ == '__main__': main()

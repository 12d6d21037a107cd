"""Where the draw-to-draw scatter comes from: its evaluation part and its training part.

    python bench/experiments/eval_split.py RUN [RUN ...] --tag avx2      # writes bench/results/eval_split_avx2.json and .md
    python bench/experiments/eval_split.py runs/s*/ --tag avx2 --sets 4 --threads 1 --results /tmp/out

Each RUN is a finished run directory (`ael-train`'s, or a `bench/grid.py` cell's): `config.yaml`, `latest.pth` and
`summary.json`. Its final model, the one `ael-train` reports (the EMA teacher where the method has one, else the
student), is evaluated on `--sets` disjoint validation sets of the run's own size n: scenes k*n .. (k+1)*n - 1 of the
synthetic val split, so set 0 is the run's own (its figure is checked against `summary.json`). The run's evaluation
protocol, precision, memory format and thread count are used (`--threads` overrides the last). Per method:

- evaluation variance: the variance across the sets within a run (ddof 1), averaged over the runs;
- training variance: the variance across runs of each run's mean over the sets (ddof 1), less the evaluation
  variance / sets (what is left of it in a mean of that many sets); negative estimates are reported as they are;
- one draw's variance (one val set, as every stored draw): training + evaluation variance, and the evaluation share.

Tail mIoU and mIoU in %. Only the synthetic dataset: its val split is drawn from a seed, so more scenes of the same
kind can be drawn; a dataset read from files has the images it has. The synthetic val set's size is
`data.synthetic_val_n` (None: 100 scenes; the `cpu` preset's: 400), capped by `eval.max_images`."""
from __future__ import annotations
import argparse, json
from pathlib import Path
import numpy as np
import torch
from ael_nb.draws import read_stored
from ael_nb.config import apply_overrides, resolved
from ael_nb.core import DataError, atomic_write_text
from ael_nb.evaluate import evaluate, protocol_settings
from ael_nb.plan import make_dataset
from ael_nb.state import load_model

RESULTS = Path(__file__).resolve().parent / 'results'

def val_sets(cfg, k: int) -> list:
    "`k` disjoint synthetic val sets of the run's own size (set 0: the scenes the run evaluated)."
    own = make_dataset(cfg, cfg.data.val_split)
    n = min(cfg.eval.max_images or len(own), len(own))
    big = make_dataset(apply_overrides(cfg, [f'data.synthetic_val_n={k * n}']), cfg.data.val_split)
    return [big.subset(big.ids[i * n:(i + 1) * n]) for i in range(k)]

def check_runs(dirs: list[Path]):
    "Every run finished, at one setting (`ael_nb.draws.setting_of`): else a `DataError` naming the run, before any evaluation."
    first = None
    for d in dirs:
        sm = d / 'summary.json'
        draw = read_stored(sm) if sm.is_file() and (d / 'config.yaml').is_file() else None
        if draw is None: raise DataError(d, 'not a finished run directory (config.yaml and summary.json at its last step)')
        if first is None: first = (d, draw['setting'])
        elif draw['setting'] != first[1]:
            keys = sorted(k for k in draw['setting'] | first[1] if draw['setting'].get(k) != first[1].get(k))
            raise DataError(d, f"another setting than {first[0]} ({', '.join(keys[:3])}): the split is of one setting's draws")

def evaluate_run(run_dir: Path, k: int, device, threads: int|None = None) -> dict:
    "One run's reported model on `k` disjoint val sets: method, seed, path, threads, its own figure and each set's."
    ck, sm = run_dir / 'latest.pth', run_dir / 'summary.json'
    for f in (ck, sm, run_dir / 'config.yaml'):
        if not f.is_file(): raise DataError(f, 'not found: a finished run directory has config.yaml, latest.pth and summary.json')
    draw = read_stored(sm)
    if draw is None: raise DataError(sm, 'not a finished run (no evaluation at its last step)')
    model, info, cfg, which = load_model(ck, 'auto', device)
    if cfg.data.dataset != 'synthetic':
        raise DataError(run_dir / 'config.yaml', f"data.dataset {cfg.data.dataset!r}: only the synthetic scenes can be drawn anew")
    run_cfg = resolved(cfg, device)                              # the precision and memory format the run evaluated with
    if run_cfg.model.channels_last: model = model.to(memory_format=torch.channels_last)
    before = torch.get_num_threads(); torch.set_num_threads(threads or draw['threads'] or before)
    try:
        e, sets = cfg.eval, []
        for ds in val_sets(cfg, k):
            s = evaluate(model, ds, info, e.mode, e.window, e.stride, e.crop, None, 0, run_cfg.optim.amp, max_size=e.max_size,
                         **protocol_settings(e)).summary(info)
            sets.append(dict(first=ds.ids[0], last=ds.ids[-1], n=len(ds), tail=100 * s['tail_miou'], miou=100 * s['miou'],
                             per_class={c: 100 * v for c, v in s['per_class'].items()}))
    finally: torch.set_num_threads(before)
    return dict(run=str(run_dir), method=draw['method'], seed=draw['seed'], path=draw['path'], threads=draw['threads'], model=which,
                amp=run_cfg.optim.amp, own=dict(tail=draw['tail'], miou=draw['miou']), sets=sets,
                own_repeated=dict(tail=sets[0]['tail'] - draw['tail'], miou=sets[0]['miou'] - (draw['miou'] or float('nan'))))

def split(x: np.ndarray) -> dict:
    "Runs x sets of one figure -> its evaluation and training variance (see the module's docstring)."
    runs, k = x.shape
    ev = float(x.var(axis=1, ddof=1).mean())
    tr = float(x.mean(axis=1).var(ddof=1) - ev / k) if runs > 1 else None
    one = None if tr is None else tr + ev
    return dict(runs=runs, sets=k, eval_var=ev, eval_sd=ev ** .5, train_var=tr, train_sd=None if tr is None else max(tr, 0) ** .5,
                one_draw_var=one, eval_share=None if not one else ev / one,
                observed_var_set0=float(x[:, 0].var(ddof=1)) if runs > 1 else None)

def eval_split(runs: list[dict]) -> dict:
    "Per method (and for the gain, AEL-like minus supervised of the same seed on the same sets): `split` of tail mIoU and mIoU."
    out = {}
    for m in dict.fromkeys(r['method'] for r in runs):
        mine = [r for r in runs if r['method'] == m]
        out[m] = {f: split(np.array([[s[f] for s in r['sets']] for r in mine])) for f in ('tail', 'miou')}
    sup = {(r['seed'], r['path'], r['threads']): r for r in runs if r['method'] == 'supervised'}
    for m in [m for m in out if m not in ('supervised', 'full')]:
        pairs = [(r, sup[k]) for r in runs if r['method'] == m and (k := (r['seed'], r['path'], r['threads'])) in sup]
        if pairs: out[f'{m} - supervised'] = {f: split(np.array([[a[f] - b[f] for a, b in zip(r['sets'], s['sets'])] for r, s in pairs]))
                                              for f in ('tail', 'miou')}
    return out

def markdown(d: dict) -> str:
    "The split as a table (sd in points of %, the evaluation share of one draw's variance)."
    f = lambda v, p=1: '-' if v is None else f'{v:.{p}f}'
    pct = lambda v: '-' if v is None else f'{100 * v:.0f} %'
    rows = [f"| {m} | {fig} | {s['runs']} | {s['sets']} | {f(s['eval_sd'])} | {f(s['train_sd'])} | "
            f"{f(None if s['one_draw_var'] is None else max(s['one_draw_var'], 0) ** .5)} | "
            f"{f(None if s['observed_var_set0'] is None else s['observed_var_set0'] ** .5)} | "
            f"{pct(s['eval_share'])} |"
            for m, e in d['split'].items() for fig, s in (('tail mIoU', e['tail']), ('mIoU', e['miou']))]
    own = {k: max((abs(v) for r in d['runs'] if (v := r['own_repeated'][k]) == v), default=None) for k in ('tail', 'miou')}
    return '\n'.join([f"# Evaluation vs training spread ({d['tag']})", '',
                      f"{len(d['runs'])} runs, each evaluated on {d['sets']} disjoint synthetic val sets of its own size "
                      f"(set 0: its own; largest difference from its stored figures: tail mIoU {f(own['tail'], 4)}, mIoU {f(own['miou'], 4)} "
                      "points; NaN where a tail class is absent from the images).", '',
                      '| method | figure | runs | sets | eval sd | training sd | one draw sd | observed sd (set 0) | eval share |',
                      '|---|---|---|---|---|---|---|---|---|', *rows, '',
                      'sd in points of %; one draw = training + evaluation variance; `python bench/experiments/eval_split.py` '
                      '(its docstring says how each is computed).', ''])

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('runs', nargs='+', help='finished run directories')
    ap.add_argument('--tag', required=True, help='names the output: eval_split_<tag>.json and .md')
    ap.add_argument('--sets', type=int, default=4, help='disjoint val sets, each of the run\'s own size (default 4; set 0 is its own)')
    ap.add_argument('--threads', type=int, help="torch threads (default: each run's own, as summary.json records)")
    ap.add_argument('--device', default='cpu', help="'cpu' (default) or 'cuda'")
    ap.add_argument('--results', default=str(RESULTS), help='folder for the output (default bench/results)')
    args = ap.parse_args(argv)
    if args.sets < 2: ap.error('--sets: at least 2 (the evaluation variance is a variance across sets)')
    try:
        check_runs([Path(r) for r in args.runs])
        runs = [evaluate_run(Path(r), args.sets, torch.device(args.device), args.threads) for r in args.runs]
    except DataError as e: ap.exit(2, f"eval_split.py: error: {e}\n")
    d = dict(tag=args.tag, sets=args.sets, unit='%', runs=runs, split=eval_split(runs))
    out = Path(args.results) / f'eval_split_{args.tag}'
    atomic_write_text(out.with_suffix('.json'), json.dumps(d, indent=1) + '\n')
    atomic_write_text(out.with_suffix('.md'), markdown(d))
    print(markdown(d))

if __name__ == '__main__': main()

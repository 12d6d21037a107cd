"""Learning curves of a grid's runs: the evaluations in RUNS/<grid dir>/<cell>/metrics.jsonl (written every quarter of a
run) -> results/<grid dir>_curves.csv (variant, fraction, seed, it, model, miou, tail_miou) and _curves.png (each variant's mean
over seeds, band min-max; solid teacher, dashed student).

    python bench/curves.py RUNS/camvid-camvid160-1500it
    python bench/curves.py RUNS/setting-synthetic96-800it-cuda --variants supervised 'ael ramp acm half' 'cutmix ramp'

Run directories are named by `bench/grid.py` as <variant>__<fraction>__s<seed>; a cell's variant name is read from
its spec.json (the directory name has it with spaces and signs replaced).
"""
import argparse, json, sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from ael_nb.compare import learning_curves, plot_learning_curves


def grid_curves(grid_runs: Path, variants=None):
    "One row per evaluation of every run under `grid_runs`: variant, fraction, seed, it, model, miou, tail_miou."
    runs = sorted(d for d in grid_runs.iterdir() if (d / 'metrics.jsonl').exists())
    if not runs: raise SystemExit(f"{grid_runs}: no run directory with a metrics.jsonl in it")
    names = {}
    for d in runs:
        spec = d / 'spec.json'
        if not spec.exists(): raise SystemExit(f"{spec}: missing (not a bench/grid.py run directory?)")
        s = json.loads(spec.read_text())
        if variants is None or s['variant'] in variants: names[(s['variant'], s['fraction'], s['seed'])] = d
    if not names: raise SystemExit(f"{grid_runs}: none of the variants {variants}")
    lc = learning_curves({'\t'.join(map(str, k)): d for k, d in names.items()})
    lc[['variant', 'fraction', 'seed']] = lc.label.str.split('\t', expand=True)
    lc['seed'] = lc.seed.astype(int)
    return lc[['variant', 'fraction', 'seed', 'it', 'model', 'miou', 'tail_miou']].round(2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('grid_runs', type=Path, help='a grid\'s folder of run directories (bench/grid.py --runs-dir RUNS: RUNS/<grid dir>)')
    ap.add_argument('--variants', nargs='+', default=None, help='only these variants')
    ap.add_argument('--results', type=Path, default=REPO / 'bench' / 'results')
    args = ap.parse_args(argv)
    if not args.grid_runs.is_dir(): ap.error(f"{args.grid_runs}: no such folder")
    lc = grid_curves(args.grid_runs, args.variants)
    args.results.mkdir(parents=True, exist_ok=True)
    out = lambda ext: args.results / f'{args.grid_runs.name}_curves{ext}'
    lc.to_csv(out('.tmp.csv'), index=False); out('.tmp.csv').replace(out('.csv'))     # written whole or not at all
    several = lc.groupby('variant').fraction.transform('nunique') > 1      # 'full' runs on fraction 1 in every grid
    label = lc.variant.where(~several, lc.variant + ' ' + lc.fraction)
    label = label + ' (seeds ' + lc.groupby(label).seed.transform(lambda x: ','.join(map(str, sorted(set(x))))) + ')'
    fig = plot_learning_curves(lc.assign(label=label),
                               title=f"{args.grid_runs.name}: mean over each variant's seeds, band min-max")
    fig.savefig(out('.tmp.png'), dpi=110); out('.tmp.png').replace(out('.png'))
    print(f"{len(lc)} evaluations of {lc.groupby(['variant', 'fraction', 'seed']).ngroups} runs -> {out('.csv')}, .png")


if __name__ == '__main__': main()

"""Which classes reach the unlabeled loss: per-class counts of the pseudo-labels in runs' stored traces.

    python bench/experiments/pseudo_labels.py RUN_DIR [RUN_DIR ...] [--from-step 400] [--csv OUT.csv]

Reads `traces/step_*.pt` of each run (what `run.trace_interval` stored: a few unlabeled images per step) with
`ael_nb.compare.loss_classes` and prints, per run, the tail classes' share of the pixels with a pseudo-label (after the
confidence threshold where there is one), of those AES kept, and of the loss weight (DR's), then the pixels per tail
class, and the share of unlabeled pixels that passed the threshold as logged in `metrics.jsonl` (FixMatch, UniMatch).
A run made by `bench/grid.py` is labelled with its variant (`spec.json`), any other with its folder's name. `--csv`
keeps the long table (one row per run and class) for nbs/24_compare's picture."""
from __future__ import annotations
import argparse, json, sys
from pathlib import Path
import pandas as pd
from ael_nb.core import atomic_write_text
from ael_nb.compare import loss_classes, tail_shares
from ael_nb.runlog import read_metrics


def label(run: Path) -> str:
    "The grid variant a run belongs to (its `spec.json`), else the folder's name."
    spec = run / 'spec.json'
    return json.loads(spec.read_text())['variant'] if spec.is_file() else run.name


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('runs', nargs='+', type=Path); ap.add_argument('--from-step', type=int, default=400)
    ap.add_argument('--csv', type=Path, help='write the per-run, per-class counts here')
    args = ap.parse_args(argv)
    try: per_run = [loss_classes({label(r): r}, args.from_step) for r in args.runs]
    except (FileNotFoundError, ValueError) as e: sys.exit(str(e))
    lc = pd.concat(per_run, ignore_index=True)
    sh = tail_shares(lc)
    tail = list(lc[lc.group == 'tail'].cls.unique())
    print(f"tail classes' share of the unlabeled loss in the stored traces from step {args.from_step} on (tail: {', '.join(tail)})")
    for run, part in zip(args.runs, per_run):
        (lab, seed), = part[['label', 'seed']].drop_duplicates().itertuples(index=False)
        s, t = sh.loc[(lab, seed)], part[part.group == 'tail'].set_index('cls')
        rates = [r['pass_rate'] for r in read_metrics(run) if r.get('it', 0) >= args.from_step and 'pass_rate' in r]
        passed = f"; passed the threshold: {min(rates):.2f}-{max(rates):.2f} of the pixels" if rates else ''
        print(f"{lab} (seed {seed}, {part.traces.iloc[0]} traces): tail share of pseudo-labels {s.pseudo:.2f}%, kept {s.kept:.2f}%, "
              f"loss weight {s.weight:.2f}%; tail pixels " + ', '.join(f"{c} {t.pseudo[c]}" for c in tail) + passed)
    if args.csv: atomic_write_text(args.csv, lc.to_csv(index=False)); print(f"wrote {args.csv}")


if __name__ == '__main__':
    main()

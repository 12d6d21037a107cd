"""Which classes reach the unsupervised loss: per-class counts of the pseudo-labels in a run's stored traces.

    python bench/pseudo_labels.py RUN_DIR [RUN_DIR ...] [--from-step 400]

Reads `traces/step_*.pt` of each run (what `run.trace_interval` stored: a few unlabeled images per step) and prints,
per run, how many pseudo-labeled pixels each class has in the traces from `--from-step` on, the tail classes' share,
and the share of pixels that passed the confidence threshold (FixMatch / UniMatch; `y_hat` is already thresholded
there, 255 elsewhere; AEL's is the teacher's whole pseudo-label, before AES). Works for any method whose trace has
`y_hat`."""
from __future__ import annotations
import argparse, sys
from pathlib import Path
import torch
from ael_nb.runlog import read_traces
from ael_nb.synthetic import SYNTHETIC_INFO


def count(run: Path, from_step: int, num_classes: int) -> tuple[torch.Tensor, int, list[float]]:
    "Pixels per class in the traces' `y_hat` from `from_step` on, the number of traces read, their pass rates."
    counts, n, rates = torch.zeros(num_classes, dtype=torch.long), 0, []
    for t in read_traces(run):
        if t['it'] < from_step or 'y_hat' not in t: continue
        y = t['y_hat'].long().flatten()
        counts += torch.bincount(y[y < num_classes], minlength=num_classes); n += 1
        if 'pass_rate' in t: rates.append(float(t['pass_rate']))
    return counts, n, rates


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('runs', nargs='+', type=Path); ap.add_argument('--from-step', type=int, default=400)
    a = ap.parse_args(argv)
    info = SYNTHETIC_INFO   # the default run's dataset; its classes name the columns
    names, tail = info.class_names, info.tail_classes
    print(f"pseudo-labeled pixels per class in the stored traces from step {a.from_step} on (tail: {', '.join(names[c] for c in tail)})")
    for run in a.runs:
        c, n, rates = count(run, a.from_step, info.num_classes)
        if n == 0: sys.exit(f"{run / 'traces'}: no trace with a pseudo-label (y_hat) from step {a.from_step} on")
        share = float(c[tail].sum()) / max(int(c.sum()), 1)
        passed = f"; passed the threshold: {min(rates):.2f}-{max(rates):.2f} of the pixels" if rates else ''
        print(f"{run.name}: {n} traces, tail {int(c[tail].sum())} px ({share:.2%}): "
              + ', '.join(f"{names[k]} {int(c[k])}" for k in tail) + passed)


if __name__ == '__main__':
    main()

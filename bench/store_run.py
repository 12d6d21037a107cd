"""Store a finished `ael-train` run as one draw: `summary.json` and `config.yaml` in one JSON beside other cells.

    python bench/store_run.py RUN_DIR results/FOLDER/NAME.json --command 'ael-train --seed 1 ...' [--commit abc1234]

A run folder holds checkpoints and logs that do not belong in git; the closing summary and `bench/draws.py` read a
draw from its final metrics, configuration, split and provenance (path, threads, torch, device), which this file
keeps, with the command that made it (`ael_nb.cli.regenerate_command` prints it)."""
import argparse, json
from pathlib import Path
from ael_nb.cli import read_stored
from ael_nb.config import read_yaml
from ael_nb.core import atomic_write_text

KEEP = ('method', 'preset', 'it', 'iters', 'amp', 'device', 'device_name', 'path', 'threads', 'torch', 'time_s', 'manifest',
        'manifest_hash', 'weights', 'teacher_weights', 'table')


def cell_of(run_dir: Path, command: str, commit: str|None = None) -> dict:
    "The run's summary (what decides and describes the draw), its configuration, its final metrics and the command."
    if not (run_dir / 'summary.json').is_file() or read_stored(run_dir / 'summary.json') is None:
        raise SystemExit(f'{run_dir}: not a finished run (no summary.json at its last step with config.yaml)')
    s = json.loads((run_dir / 'summary.json').read_text())
    cfg = read_yaml(run_dir / 'config.yaml')
    # `variant` and `seed` as a grid cell names them (`ael_nb.compare.read_result` reads a cell by these)
    return {k: s[k] for k in KEEP if k in s} | dict(variant=cfg['method']['name'], seed=cfg['run']['seed'], metrics=s['last'],
                                                   config=cfg, command=command, commit=commit)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('run_dir', type=Path)
    ap.add_argument('dest', type=Path, help='the cell file to write (a folder under bench/results, one file per run)')
    ap.add_argument('--command', required=True, help='the command that trained the run, as it was typed')
    ap.add_argument('--commit', default=None, help="the kit's commit it ran at")
    args = ap.parse_args(argv)
    cell = cell_of(args.run_dir, args.command, args.commit)
    args.dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.dest, json.dumps(cell, indent=1) + '\n')
    d = read_stored(args.dest)
    print(f"{args.dest}: {d['method']} seed {d['seed']}, {d['path']} at {d['threads']} threads, tail {d['tail']:.1f}")


if __name__ == '__main__': main()

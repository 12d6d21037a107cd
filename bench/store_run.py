"""Store a finished `ael-train` run as one draw: `summary.json` and `config.yaml` in one JSON beside other cells.

    python bench/store_run.py RUN_DIR results/FOLDER/NAME.json --command 'ael-train --seed 1 ...' [--commit abc1234]
    python bench/store_run.py RUN_DIR ... --val-n 400     # its final models evaluated on 400 synthetic val scenes


A run folder holds checkpoints and logs that do not belong in git; the closing summary and `bench/draws.py` read a
draw from its final metrics, configuration, split and provenance (path, threads, torch, device), which this file
keeps, with the command that made it (`ael_nb.draws.regenerate_command` prints it).

`--val-n N` stores the draw of the same training at `data.synthetic_val_n=N`: the val set's size changes what is
measured, not what is learned (`tests/test_train.py` trains the same weights at two sizes), so the run's final models
are evaluated on N scenes, which begin with the run's own. Its own scenes are evaluated apart first and must repeat
the stored figures exactly, which holds only on the path, thread count and precision it trained with: run this under
the same `ONEDNN_MAX_CPU_ISA` / `ATEN_CPU_CAPABILITY` as the run. The cell says so under `reevaluated`."""
import argparse, json
from pathlib import Path
import torch
from ael_nb.draws import read_stored
from ael_nb.config import apply_overrides, from_dict, read_yaml, resolved, upgrade_config
from ael_nb.core import DataError, atomic_write_text, instruction_path
from ael_nb.evaluate import evaluate, protocol_settings
from ael_nb.plan import make_dataset
from ael_nb.state import load_model
from stored import refresh              # bench/stored.py: the package's copy of bench/results

KEEP = ('method', 'preset', 'it', 'iters', 'amp', 'device', 'device_name', 'path', 'threads', 'torch', 'time_s', 'manifest',
        'manifest_hash', 'weights', 'teacher_weights', 'table')


def reevaluate(run_dir: Path, s: dict, cfg: dict, val_n: int) -> tuple[dict, dict, int]:
    "The run's final models on `val_n` synthetic val scenes: `last` metrics and configuration as a run at that size writes them, and its own val set's size."
    c = from_dict(upgrade_config(cfg))                              # a key it predates: as it ran
    if c.data.dataset != 'synthetic': raise DataError(run_dir / 'config.yaml', 'only synthetic scenes can be drawn anew (--val-n)')
    if c.eval.max_images is not None: raise DataError(run_dir / 'config.yaml', 'eval.max_images is set: the run saw part of its val set')
    run = resolved(c, 'cpu')                                       # the precision and memory format the run evaluated with
    if (here := instruction_path('cpu', run.optim.amp)) != s['path']:
        raise DataError(run_dir / 'summary.json', f"trained on {s['path']}, this process runs {here}: its figures repeat only "
                                                  "on its own path (ONEDNN_MAX_CPU_ISA / ATEN_CPU_CAPABILITY as the run had them)")
    own = make_dataset(c, c.data.val_split)
    if val_n <= len(own): raise DataError(run_dir / 'config.yaml', f'--val-n {val_n}: the run already saw {len(own)} val scenes')
    new = apply_overrides(c, [f'data.synthetic_val_n={val_n}'])
    big = make_dataset(new, c.data.val_split)
    more, e, last = big.subset(big.ids[len(own):]), c.eval, {}
    before = torch.get_num_threads(); torch.set_num_threads(s['threads'])
    try:
        for which in s['last']:
            model, info, _, _ = load_model(run_dir / 'latest.pth', which, 'cpu')
            if run.model.channels_last: model = model.to(memory_format=torch.channels_last)
            ev = lambda ds: evaluate(model, ds, info, e.mode, e.window, e.stride, e.crop, None, 0, run.optim.amp, max_size=e.max_size,
                                     **protocol_settings(e))
            cm = ev(own)
            if json.dumps(cm.summary(info)) != json.dumps(s['last'][which]):   # NaN (a class absent) compares equal here
                raise DataError(run_dir / 'summary.json', f"its {which} on its own {len(own)} val scenes does not repeat the stored "
                                                          "figures: another path, thread count or code than the run's")
            last[which] = cm.merge(ev(more)).summary(info)
    finally: torch.set_num_threads(before)
    return last, cfg | dict(data=cfg['data'] | dict(synthetic_val_n=val_n)), len(own)

def cell_of(run_dir: Path, command: str, commit: str|None = None, val_n: int|None = None) -> dict:
    "The run's summary (what decides and describes the draw), its configuration, its final metrics and the command."
    if not (run_dir / 'summary.json').is_file() or read_stored(run_dir / 'summary.json') is None:
        raise SystemExit(f'{run_dir}: not a finished run (no summary.json at its last step with config.yaml)')
    s = json.loads((run_dir / 'summary.json').read_text())
    cfg, last, extra = read_yaml(run_dir / 'config.yaml'), s['last'], {}
    if val_n is not None:
        last, cfg, n0 = reevaluate(run_dir, s, cfg, val_n)
        extra = dict(reevaluated=dict(val_n=val_n, own_val_n=n0, own_tail={k: v['tail_miou'] for k, v in s['last'].items()},
                                      how=f'bench/store_run.py --val-n {val_n}: the final models on {val_n} val scenes, '
                                          f'the first {n0} repeating the run\'s own figures exactly'))
    # `variant` and `seed` as a grid cell names them (`ael_nb.compare.read_result` reads a cell by these)
    return {k: s[k] for k in KEEP if k in s} | dict(variant=cfg['method']['name'], seed=cfg['run']['seed'], metrics=last,
                                                   config=cfg, command=command, commit=commit) | extra


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('run_dir', type=Path)
    ap.add_argument('dest', type=Path, help='the cell file to write (a folder under bench/results, one file per run)')
    ap.add_argument('--command', required=True, help='the command that trained the run, as it was typed')
    ap.add_argument('--commit', default=None, help="the kit's commit it ran at")
    ap.add_argument('--val-n', type=int, default=None, help='evaluate the final models on this many synthetic val scenes')
    args = ap.parse_args(argv)
    try: cell = cell_of(args.run_dir, args.command, args.commit, args.val_n)
    except DataError as e: raise SystemExit(f'store_run: {e}') from None   # one line naming the file, nothing written
    args.dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.dest, json.dumps(cell, indent=1) + '\n')
    d = read_stored(args.dest)
    refresh(args.dest.parent.parent)
    print(f"{args.dest}: {d['method']} seed {d['seed']}, {d['path']} at {d['threads']} thread{'s' * (d['threads'] != 1)}, tail {d['tail']:.1f}")


if __name__ == '__main__': main()

"""Bring a GPU run's reports (the files `bench/paper_scale_gpu.sh` leaves in its OUT folder) into bench/results, named
by device and date, each with a provenance line: device, torch, project commit, how it was measured.

    python bench/fold_gpu.py A [B ...] --device h200 --date 2026-11-28 --commit fe6d021 \\
        --how 'bench/paper_scale_gpu.sh on one H200, run from a copy of the tree' [--note '...']

  A/paper_scale.json, B/...  -> results/paper_scale_cuda_<device>_<date>.{json,md}  (the stages' parts in one report;
                                                                                   26_arithmetic reads the json)
  A/floor_cuda_X.json        -> results/floor_cuda_<device>_X_<date>.{json,md}      (bench/floor.py's report)
The markdown is rendered again from the json by the scripts' own `markdown` (the command line from the report's .md)."""
import argparse, json, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import floor, paper_scale                  # bench/floor.py, bench/paper_scale.py: their report formats
from stored import refresh                 # bench/stored.py: the package's copy of bench/results


def provenance(args, res: dict) -> str:
    "One line: where, with what and how the report was measured."
    dev = res.get('device') or res.get('host', {}).get('device')
    torch_v = res.get('torch') or res.get('host', {}).get('torch')
    return f"{dev}, torch {torch_v}, project commit {args.commit}, {args.date}; {args.how}"


def command_of(md_path: Path) -> str:
    "The command line a floor report's markdown names (its first `...` line), else a placeholder."
    lines = md_path.read_text().splitlines() if md_path.is_file() else []
    return next((l.strip('`') for l in lines if l.startswith('`') and l.endswith('`')), 'not recorded')


def merged(reports: list[dict]) -> dict:
    "The paper_scale.json of several stages as one: the parts of each, the first one's machine, every start, the sum of times."
    res = dict(reports[0])
    for r in reports[1:]:
        res.update({k: v for k, v in r.items() if k not in ('device', 'torch', 'started', 'args', 'total_s')})
    res['started'] = ', '.join(r['started'] for r in reports)
    res['total_s'] = round(sum(r.get('total_s', 0) for r in reports), 1)
    if len(reports) > 1: res['args'] = [r.get('args', {}) for r in reports]
    return res


def fold(args) -> list[Path]:
    srcs, out, written = [Path(s) for s in args.src], Path(args.results), []
    def write(name: str, res: dict, md: str):
        res = dict(provenance=provenance(args, res), **({'notes': args.note} if args.note else {}), **res)
        head = f"Provenance: {res['provenance']}.\n\n" + ''.join(f"Note: {n}\n\n" for n in args.note)
        (out / f'{name}.json').write_text(json.dumps(res, indent=1) + '\n')
        (out / f'{name}.md').write_text(head + md)
        written.extend([out / f'{name}.json', out / f'{name}.md'])
    reports = [json.loads((s / 'paper_scale.json').read_text()) for s in srcs if (s / 'paper_scale.json').is_file()]
    for r in reports: r.pop('runs', None); r.get('args', {}).pop('out', None)   # the run's own temporary paths
    if reports:
        res = merged(reports)
        write(f'paper_scale_cuda_{args.device}_{args.date}', res, paper_scale.markdown(res))
    for f in sorted(f for s in srcs for f in s.glob('floor_cuda_*.json')):
        res = json.loads(f.read_text())
        part = f.stem[len('floor_cuda_'):]
        res['tag'] = f'cuda_{args.device}_{part}'
        write(f'floor_cuda_{args.device}_{part}_{args.date}', res, floor.markdown(res, command_of(f.with_suffix('.md'))))
    if not written: raise SystemExit(f"fold_gpu: {', '.join(map(str, srcs))}: no paper_scale.json and no floor_cuda_*.json")
    return written


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('src', nargs='+', help="the GPU run's stages: each an unpacked paper_scale_<stage>.tgz")
    p.add_argument('--device', required=True, help='short GPU name for the file names, e.g. h200')
    p.add_argument('--date', required=True, help='day of the measurement, YYYY-MM-DD')
    p.add_argument('--commit', required=True, help='project commit that was measured')
    p.add_argument('--how', required=True, help='how it was measured (command, machine), one sentence')
    p.add_argument('--note', action='append', default=[], help='a line to add to every report (repeatable)')
    p.add_argument('--results', default=str(HERE / 'results'))
    args = p.parse_args(argv)
    for f in fold(args): print(f)
    refresh(args.results)                  # ael_nb.arithmetic.measured_speed reads the package's copy
    return 0


if __name__ == '__main__': sys.exit(main())

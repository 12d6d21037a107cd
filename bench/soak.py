"""Soak: one tiny run under `ael-launch`, interrupted again and again at random moments, resumed after each fault; at
the end its weights and its metrics.jsonl must equal those of the same run trained without a stop.

Faults, in a shuffled cycle: SIGKILL to every process of the run (launcher, torchrun, ranks), SIGTERM to ael-launch,
SIGINT to its process group (Ctrl-C), a second SIGINT soon after the first, SIGUSR1 to ael-launch (a scheduler's
warning), and a full disk: the run folder lives on a small tmpfs that is filled at a random moment, so that the next
write meets ENOSPC. A moment is drawn either in the start-up (before the first step) or after the first step of the
resumed segment, from a seed that the report prints. After each fault: no process is left, every file the run keeps
reads whole (latest.pth, metrics.jsonl line by line, config.yaml), no temporary file is left but after a SIGKILL,
and the checkpoint never goes back.

    python bench/soak.py --procs 1 --faults 50 --seed 7 --json bench/results/soak_1proc.json
    python bench/soak.py --procs 2 --faults 50 --seed 7 --json bench/results/soak_2proc.json   # 2-process DDP (gloo)

Needs Linux and root (the tmpfs mount). Minutes on a 2-core CPU."""
import argparse, json, os, random, re, signal, subprocess, sys, tempfile, time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from ael_nb.config import load_config
from ael_nb.faults import descendants, partial_writes, running
from ael_nb.plan import TINY
from ael_nb.runlog import read_metrics
from ael_nb.state import read_checkpoint

TIMEOUT_S = 240    # a fault's segment that runs longer hangs (start-up is under a minute on a loaded 2-core CPU)
KINDS = ('SIGKILL', 'SIGTERM', 'SIGINT', 'SIGINT2', 'SIGUSR1', 'ENOSPC')
ENV = dict(os.environ, OMP_NUM_THREADS='1', PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", PYTHONPATH=str(REPO))


def settings(procs: int, iters: int) -> list[str]:
    "The tiny run: a checkpoint every step, a log line every step (two ranks: two labeled images each)."
    return TINY + ['data.batch_size=4'] * (procs > 1) + [f'optim.iters={iters}', 'run.log_interval=1',
                                                          'run.checkpoint_interval=1', 'run.checkpoint_minutes=0']


def launch(root: Path, procs: int, iters: int) -> subprocess.Popen:
    cmd = ['ael-launch', '--preset', 'cpu', '--gpus', str(procs), '--out-root', str(root)] + settings(procs, iters)
    return subprocess.Popen(cmd, env=ENV, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


def strip(recs): return [{k: v for k, v in r.items() if k not in ('img_per_s', 'peak_mem_gb')} for r in recs]


def whole(run: Path) -> list[str]:
    "What in `run` does not read whole: latest.pth, previous.pth, config.yaml, every line of metrics.jsonl."
    bad = []
    for n in ('latest.pth', 'previous.pth'):
        if (run / n).exists():
            try: read_checkpoint(run / n)
            except Exception as e: bad.append(f'{n}: {type(e).__name__}: {e}')
    if (run / 'config.yaml').exists():
        try: load_config(run / 'config.yaml', stored=True)
        except Exception as e: bad.append(f'config.yaml: {e}')
    if (run / 'metrics.jsonl').exists():
        for i, l in enumerate((run / 'metrics.jsonl').read_text().split('\n')[:-1]):
            try: json.loads(l)
            except ValueError: bad.append(f'metrics.jsonl line {i + 1} is not JSON: {l[:60]!r}')
        if not (run / 'metrics.jsonl').read_text().endswith('\n') and (run / 'metrics.jsonl').stat().st_size:
            bad.append('metrics.jsonl ends in a partial line')
    return bad


def fill(disk: Path) -> Path:
    "Take all the free space of `disk` in one file: the run's next write meets ENOSPC."
    filler = disk / 'filler'
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(filler, 'wb') as f:
        try: os.posix_fallocate(f.fileno(), 0, free)
        except OSError: pass
    return filler


def reference(work: Path, procs: int, iters: int) -> dict:
    "The same run without a stop: its digest, its metrics, its time to the first step and per step."
    root = work / 'reference'
    t0 = time.time(); p = launch(root, procs, iters); run = root / 'cpu' / 'drawn_seed0'
    while lines(run / 'metrics.jsonl') < 1 and p.poll() is None: time.sleep(0.05)
    t1 = time.time(); _, err = p.communicate(); t2 = time.time()
    if p.returncode: raise SystemExit(f'the reference run failed ({p.returncode}): {err[-2000:]}')
    return dict(summary=json.loads((run / 'summary.json').read_text()), metrics=strip(read_metrics(run)),
                startup_s=t1 - t0, step_s=(t2 - t1) / max(iters - 1, 1))


def soak(work, procs: int = 1, faults: int = 50, seed: int | None = None, iters: int | None = None, say=print) -> dict:
    "Run the soak in `work` (a tmpfs is mounted at `work/disk`); returns the report."
    work = Path(work); work.mkdir(parents=True, exist_ok=True)
    seed = random.SystemRandom().randrange(2 ** 31) if seed is None else seed
    iters = iters or 2 * faults
    say(f'soak: seed {seed}, {faults} faults, {procs} process(es), {iters} steps')
    rng = random.Random(seed)
    ref = reference(work, procs, iters)
    say(f"reference: digest {ref['summary']['weights']}, start-up {ref['startup_s']:.1f} s, {ref['step_s']:.2f} s a step")
    disk = work / 'disk'; disk.mkdir(exist_ok=True)
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1g', 'tmpfs', str(disk)], capture_output=True, text=True)
    if r.returncode: raise SystemExit(f'cannot mount a tmpfs at {disk} for the full-disk fault: {r.stderr.strip()}')
    plan = [KINDS[i % len(KINDS)] for i in range(faults)]; rng.shuffle(plan)
    run, log, last_it = disk / 'cpu' / 'drawn_seed0', [], 0
    try:
        for i, kind in enumerate(plan):
            before = lines(run / 'metrics.jsonl')
            in_startup = rng.random() < 0.3
            delay = rng.uniform(0, ref['startup_s']) if in_startup else rng.uniform(0, 2 * ref['step_s'])
            t0 = time.time(); p = launch(disk, procs, iters)
            if not in_startup:   # the moment counts from the segment's first step
                while lines(run / 'metrics.jsonl') <= before and p.poll() is None: time.sleep(0.02)
            time.sleep(delay)
            procs_now = descendants(p.pid)
            filler, hit = None, p.poll() is None
            if hit:
                if kind == 'SIGKILL':
                    for pid in procs_now[::-1] + [p.pid]:
                        try: os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError: pass
                elif kind == 'SIGTERM': p.send_signal(signal.SIGTERM)
                elif kind == 'SIGUSR1': p.send_signal(signal.SIGUSR1)
                elif kind.startswith('SIGINT'):
                    os.killpg(p.pid, signal.SIGINT)
                    if kind == 'SIGINT2': time.sleep(rng.uniform(0, 0.5)); os.killpg(p.pid, signal.SIGINT)
                elif kind == 'ENOSPC': filler = fill(disk)
            hung = []
            try: _, err = p.communicate(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:        # what was still running, then end it and go on
                for q in [p.pid] + descendants(p.pid):
                    try: hung.append(f"{q} {Path(f'/proc/{q}/cmdline').read_text().replace(chr(0), ' ')[:90]} "
                                     f"wchan={Path(f'/proc/{q}/wchan').read_text()}")
                    except OSError: pass
                for q in descendants(p.pid)[::-1] + [p.pid]:
                    try: os.kill(q, signal.SIGKILL)
                    except ProcessLookupError: pass
                _, err = p.communicate()
            if filler is not None: filler.unlink()
            t_end = time.time()
            while any(running(q) for q in procs_now) and time.time() - t_end < 60: time.sleep(0.1)
            left = [q for q in procs_now if running(q)]
            it = read_checkpoint(run / 'latest.pth')['it'] if (run / 'latest.pth').exists() else 0
            said = re.search(r'(SIG\w+) at step (\d+) of', err)
            partial = [q.name for q in partial_writes(run)] if run.exists() else []
            problems = whole(run) if run.exists() else []
            problems += [f'processes left: {left}'] * bool(left)
            problems += [f'checkpoint went back: {last_it} -> {it}'] * (it < last_it)
            problems += [f'temporary files left: {partial}'] * bool(partial and kind != 'SIGKILL')
            if said and int(said.group(2)) != it: problems.append(f"rank 0 said it saved step {said.group(2)}, latest.pth holds {it}")
            problems += [f'did not end within {TIMEOUT_S} s: ' + '; '.join(hung) + ' | ' + err[-400:]] * bool(hung)
            # a full disk fails the run: ael-train's one line, then torchrun's report of a failed worker (its own words)
            disk_full = kind == 'ENOSPC' and 'no space left on device' in err and 'ChildFailedError' in err
            if 'Traceback' in err and not disk_full: problems.append('a traceback: ' + err[err.index('Traceback'):][-300:])
            problems += [f'the run ended before the fault (status {p.returncode})'] * (not hit)
            tail = err.strip().splitlines()[-1] if err.strip() else ''
            rec = dict(i=i, fault=kind, moment='start-up' if in_startup else 'training', delay_s=round(delay, 3),
                       status=p.returncode, latest_it=it, hit=hit, err_tail=err[-600:],
                       secs=round(t_end - t0, 1), last_line=tail[:160], problems=problems)
            log.append(rec); last_it = it
            say(f"{i:3d} {kind:8s} {rec['moment']:8s} +{delay:5.2f} s  status {p.returncode:4d}  latest.pth step {it:3d}"
                + (f"  PROBLEMS: {problems}" if problems else ''))
            if (run / 'summary.json').exists(): say('the run finished before the faults ran out'); break
        p = launch(disk, procs, iters); _, err = p.communicate()
        final = json.loads((run / 'summary.json').read_text()) if p.returncode == 0 else {}
        same_metrics = strip(read_metrics(run)) == ref['metrics'] if final else False
        final_problems = whole(run) + [q.name for q in partial_writes(run)]
    finally:
        subprocess.run(['umount', '-l', str(disk)], capture_output=True)
    report = dict(seed=seed, procs=procs, iters=iters, faults_planned=faults,
                  faults_sent=sum(r['hit'] for r in log), resumes=len(log),
                  by_kind={k: sum(r['fault'] == k for r in log) for k in KINDS},
                  statuses={k: sorted({r['status'] for r in log if r['fault'] == k}) for k in KINDS},
                  in_training=sum(r['moment'] == 'training' for r in log),
                  reference_digest=ref['summary']['weights'], final_digest=final.get('weights'),
                  final_status=p.returncode, final_it=final.get('it'), metrics_equal=same_metrics,
                  problems=[(r['i'], r['fault'], q) for r in log for q in r['problems']] + [(None, 'final', q) for q in final_problems],
                  faults=log)
    say(f"final: status {p.returncode}, step {final.get('it')}, digest {final.get('weights')} "
        f"(reference {ref['summary']['weights']}), metrics.jsonl equal: {same_metrics}, problems: {len(report['problems'])}")
    return report


def markdown(rep: dict) -> str:
    "The report as RESULTS.md shows it: faults by kind with the exit statuses seen, resumes, digests."
    rows = '\n'.join(f"| {k} | {rep['by_kind'][k]} | {', '.join(map(str, rep['statuses'][k]))} |" for k in KINDS)
    return (f"**{rep['procs']} process{'es' * (rep['procs'] > 1)}** (seed {rep['seed']}, {rep['iters']} steps): "
            f"{rep['faults_sent']} faults sent to a running run ({rep['in_training']} after a step, the others in the start-up), "
            f"{rep['resumes']} resumes, then the last start ran to step {rep['final_it']} (status {rep['final_status']}). "
            f"Final weights digest `{rep['final_digest']}`, uninterrupted run `{rep['reference_digest']}`: "
            f"{'equal' if rep['final_digest'] == rep['reference_digest'] else 'DIFFERENT'}; metrics.jsonl "
            f"{'equal' if rep['metrics_equal'] else 'DIFFERENT'} (throughput aside); problems found: {len(rep['problems'])}.\n\n"
            f"| fault | sent | exit statuses of ael-launch |\n|---|---|---|\n{rows}\n")


if __name__ == '__main__':
    a = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    a.add_argument('--procs', type=int, default=1); a.add_argument('--faults', type=int, default=50)
    a.add_argument('--seed', type=int); a.add_argument('--iters', type=int)
    a.add_argument('--work', help='work folder (default: a new temporary one)'); a.add_argument('--json')
    a.add_argument('--report', nargs='+', metavar='JSON', help='print the markdown of these reports, run nothing')
    args = a.parse_args()
    if args.report: print('\n'.join(markdown(json.loads(Path(f).read_text())) for f in args.report)); sys.exit(0)
    work = Path(args.work or tempfile.mkdtemp(prefix='ael-soak-'))
    rep = soak(work, args.procs, args.faults, args.seed, args.iters)
    rep['command'] = 'python ' + ' '.join(sys.argv)
    if args.json: Path(args.json).parent.mkdir(parents=True, exist_ok=True); Path(args.json).write_text(json.dumps(rep, indent=1))
    ok = rep['final_digest'] == rep['reference_digest'] and rep['metrics_equal'] and not rep['problems'] and rep['faults_sent'] >= args.faults
    sys.exit(0 if ok else 1)

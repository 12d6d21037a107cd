"""Soak: one tiny run under `ael-launch`, interrupted again and again at random moments while it starts or trains,
resumed after each fault; each time it finishes, its weights and its metrics.jsonl must equal those of the same run
trained without a stop, and it starts again from scratch until the faults asked for have all reached a running run.

Faults, in a shuffled cycle: SIGKILL to every process of the run (launcher, torchrun, ranks), SIGTERM to ael-launch,
SIGINT to its process group (Ctrl-C), a second SIGINT soon after the first, SIGUSR1 to ael-launch (a scheduler's
warning), and a full disk: the run folder lives on a small tmpfs that is filled at a random moment and kept full
while that run lasts, so that its next write meets ENOSPC. A moment is drawn, from a seed that the report prints, either in the start-up (a delay after the
launch, up to the reference run's time to its first step) or in training: after the segment's k-th new line of
metrics.jsonl (k from 1 to 3), plus up to one step's time. Counted in steps, the moment lands while the run trains
whatever the machine's load; the per-step time comes from the arrival times of the reference run's training lines
(its final evaluation left out). A fault that finds the run already ended is reported and not counted.

Each fault in training costs the run a few steps, so a run of `--iters` steps (40) holds a dozen or so; a run that
finishes is checked and started again from scratch (a new round), rather than made hundreds of steps long: every
round ends with a comparison to the reference, and a fault costs a start-up, not steps. After each fault: no process
is left, every file the run keeps reads whole (latest.pth, metrics.jsonl line by line, config.yaml), no temporary
file is left but after a SIGKILL, and the checkpoint never goes back within a round. metrics.jsonl is compared
without its throughput and memory fields (`img_per_s`, `peak_mem_gb`), which measure the machine, not the run.

    python bench/soak.py --procs 1 --faults 50 --seed 7 --json bench/results/soak/soak_1proc_50faults.json
    python bench/soak.py --procs 2 --faults 50 --seed 7 --json bench/results/soak/soak_2proc_50faults.json   # DDP (gloo)

Needs Linux and root (the tmpfs mount). About half a minute a fault on a loaded 2-core CPU."""
import argparse, json, os, random, re, shutil, signal, statistics, subprocess, sys, tempfile, threading, time
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


class Filler(threading.Thread):
    "Keep `disk` full while the run lasts: its next write meets ENOSPC, also after it freed space (a replaced checkpoint)."
    # one fallocate of the free space fails whole when the run writes meanwhile; pieces that halve on failure do not
    def __init__(self, disk: Path):
        super().__init__(daemon=True)
        self.path, self.done, self.full = disk / 'filler', threading.Event(), threading.Event()
    def run(self):
        size = 0
        with open(self.path, 'wb') as f:
            while not self.done.is_set():
                piece = 1 << 26
                while piece >= 4096:
                    try: os.posix_fallocate(f.fileno(), size, piece); size += piece
                    except OSError: piece //= 2
                self.full.set(); self.done.wait(0.005)
    def stop(self): self.done.set(); self.join(); self.path.unlink()


def reference(work: Path, procs: int, iters: int) -> dict:
    "The same run without a stop: its digest, its metrics, its time to the first step and per step (training lines)."
    root = work / 'reference'
    t0 = time.time(); p = launch(root, procs, iters); run = root / 'cpu' / 'drawn_seed0'
    seen = []                                           # the arrival time of each new line of metrics.jsonl
    while p.poll() is None:
        seen += [time.time()] * (lines(run / 'metrics.jsonl') - len(seen)); time.sleep(0.02)
    _, err = p.communicate()
    if p.returncode or len(seen) < 3: raise SystemExit(f'the reference run failed ({p.returncode}): {err[-2000:]}')
    steps = seen[:iters]                                # the training lines; the evaluation's comes after them
    return dict(summary=json.loads((run / 'summary.json').read_text()), metrics=strip(read_metrics(run)),
                startup_s=steps[0] - t0, step_s=statistics.median(b - a for a, b in zip(steps, steps[1:])))


def send(kind: str, p: subprocess.Popen, procs_now: list[int], disk: Path, rng) -> Filler | None:
    "Send the fault `kind` to the run of launcher `p`; the `Filler` of a full disk, once the disk is full."
    if kind == 'SIGKILL':
        for pid in procs_now[::-1] + [p.pid]:
            try: os.kill(pid, signal.SIGKILL)
            except ProcessLookupError: pass
    elif kind == 'SIGTERM': p.send_signal(signal.SIGTERM)
    elif kind == 'SIGUSR1': p.send_signal(signal.SIGUSR1)
    elif kind.startswith('SIGINT'):
        os.killpg(p.pid, signal.SIGINT)
        if kind == 'SIGINT2': time.sleep(rng.uniform(0, 0.5)); os.killpg(p.pid, signal.SIGINT)
    elif kind == 'ENOSPC': f = Filler(disk); f.start(); f.full.wait(); return f


def wait_end(p: subprocess.Popen) -> tuple[str, list[str]]:
    "The launcher's stderr once it ended, and what was still running if it did not end within TIMEOUT_S (then killed)."
    hung = []
    try: return p.communicate(timeout=TIMEOUT_S)[1], hung
    except subprocess.TimeoutExpired: pass
    for q in [p.pid] + descendants(p.pid):
        try: hung.append(f"{q} {Path(f'/proc/{q}/cmdline').read_text().replace(chr(0), ' ')[:90]} "
                         f"wchan={Path(f'/proc/{q}/wchan').read_text()}")
        except OSError: pass
    for q in descendants(p.pid)[::-1] + [p.pid]:
        try: os.kill(q, signal.SIGKILL)
        except ProcessLookupError: pass
    return p.communicate()[1], hung


def checked_round(run: Path, ref: dict, faults: int) -> dict:
    "A finished run against the reference: digest, metrics.jsonl, files whole."
    final = json.loads((run / 'summary.json').read_text())
    return dict(faults=faults, digest=final['weights'], it=final['it'], digest_equal=final['weights'] == ref['summary']['weights'],
                metrics_equal=strip(read_metrics(run)) == ref['metrics'],
                problems=whole(run) + [q.name for q in partial_writes(run)])


def soak(work, procs: int = 1, faults: int = 50, seed: int | None = None, iters: int = 40, say=print) -> dict:
    "Run the soak in `work` (a tmpfs is mounted at `work/disk`) until `faults` faults reached a running run; the report."
    work = Path(work); work.mkdir(parents=True, exist_ok=True)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:   # started in the background: the launchers would inherit
        signal.signal(signal.SIGINT, signal.default_int_handler)   # the ignoring, and no Ctrl-C fault would reach them
    seed = random.SystemRandom().randrange(2 ** 31) if seed is None else seed
    say(f'soak: seed {seed}, {faults} faults, {procs} process(es), {iters} steps a run')
    rng = random.Random(seed)
    ref = reference(work, procs, iters)
    say(f"reference: digest {ref['summary']['weights']}, start-up {ref['startup_s']:.1f} s, {ref['step_s']:.2f} s a step")
    disk = work / 'disk'; disk.mkdir(exist_ok=True)
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1g', 'tmpfs', str(disk)], capture_output=True, text=True)
    if r.returncode: raise SystemExit(f'cannot mount a tmpfs at {disk} for the full-disk fault: {r.stderr.strip()}')
    cycle = []
    run, log, rounds, last_it, in_round, resumes = disk / 'cpu' / 'drawn_seed0', [], [], 0, 0, 0
    try:
        while sum(r['hit'] for r in log) < faults:
            if not cycle: cycle = list(KINDS); rng.shuffle(cycle)
            kind, i = cycle.pop(), len(log)
            before, resumes = lines(run / 'metrics.jsonl'), resumes + (run / 'latest.pth').exists()
            in_startup = rng.random() < 0.3
            k = rng.randint(1, 3)
            delay = rng.uniform(0, ref['startup_s']) if in_startup else rng.uniform(0, ref['step_s'])
            t0 = time.time(); p = launch(disk, procs, iters)
            if not in_startup:   # the moment counts from the segment's k-th new step
                while lines(run / 'metrics.jsonl') < before + k and p.poll() is None: time.sleep(0.02)
            time.sleep(delay)
            procs_now, hit = descendants(p.pid), p.poll() is None
            filler = send(kind, p, procs_now, disk, rng) if hit else None
            err, hung = wait_end(p)
            if filler is not None: filler.stop()
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
            # a run that fails (a full disk: 1; a second Ctrl-C: 130) ends with ael-train's one line, then torchrun's
            # report of a failed worker, which holds a traceback of torchrun's own; any other traceback is a problem
            if err.count('Traceback (most recent call last)') > ('ChildFailedError' in err):
                problems.append('a traceback: ' + err[err.index('Traceback'):][-300:])
            kit_lines = [l for l in err.splitlines() if l.startswith(('ael-train:', 'ael-launch:'))]
            if not hit and p.returncode:                  # it ended before the fault, and failed: a fault of its own
                problems.append(f'failed before the fault (status {p.returncode}): ' + ' | '.join(kit_lines[:3]))
            rec = dict(i=i, round=len(rounds), fault=kind, moment='start-up' if in_startup else f'after {k} steps',
                       delay_s=round(delay, 3), status=p.returncode, latest_it=it, hit=hit, secs=round(t_end - t0, 1),
                       last_line=(err.strip().splitlines() or [''])[-1][:160], kit_lines=kit_lines[:6],
                       err_tail=err[-600:], problems=problems)
            log.append(rec); last_it, in_round = it, in_round + hit
            say(f"{i:3d} {kind:8s} {rec['moment']:13s} +{delay:5.2f} s  status {p.returncode:4d}  latest.pth step {it:3d}"
                + ('' if hit else '  (the run had ended: not counted)') + (f"  PROBLEMS: {problems}" if problems else ''))
            if (run / 'summary.json').exists():                   # this round finished: checked, then a new one
                rounds.append(checked_round(run, ref, in_round)); say(f"round {len(rounds)}: {rounds[-1]}")
                shutil.rmtree(run.parent); last_it, in_round = 0, 0
        while not (run / 'summary.json').exists():                # the last round: resumed to its end
            resumes += (run / 'latest.pth').exists(); p = launch(disk, procs, iters); err, hung = wait_end(p)
            if p.returncode: raise SystemExit(f'the last resume failed ({p.returncode}): {err[-2000:]}')
        rounds.append(checked_round(run, ref, in_round)); say(f"round {len(rounds)}: {rounds[-1]}")
    finally:
        subprocess.run(['umount', '-l', str(disk)], capture_output=True)
    sent = [r for r in log if r['hit']]
    report = dict(seed=seed, procs=procs, iters=iters, faults_asked=faults, faults_sent=len(sent),
                  faults_not_counted=len(log) - len(sent), resumes=resumes, rounds=rounds,
                  by_kind={k: sum(r['fault'] == k for r in sent) for k in KINDS},
                  statuses={k: sorted({r['status'] for r in sent if r['fault'] == k}) for k in KINDS},
                  in_training=sum(r['moment'] != 'start-up' for r in sent),
                  reference_digest=ref['summary']['weights'], final_digest=rounds[-1]['digest'],
                  digests_equal=all(r['digest_equal'] for r in rounds),
                  metrics_equal=all(r['metrics_equal'] for r in rounds),
                  problems=[(r['i'], r['fault'], q) for r in log for q in r['problems']]
                           + [(None, f'round {j}', q) for j, r in enumerate(rounds) for q in r['problems']],
                  reference=dict(startup_s=round(ref['startup_s'], 1), step_s=round(ref['step_s'], 3)), faults=log)
    say(f"done: {len(sent)} faults sent, {resumes} resumes, {len(rounds)} rounds; digests equal: {report['digests_equal']} "
        f"(reference {ref['summary']['weights']}), metrics.jsonl equal: {report['metrics_equal']}, "
        f"problems: {len(report['problems'])}")
    return report


def markdown(rep: dict) -> str:
    "The report as RESULTS.md shows it: faults by kind with the exit statuses seen, resumes, rounds, digests."
    rows = '\n'.join(f"| {k} | {rep['by_kind'][k]} | {', '.join(map(str, rep['statuses'][k]))} |" for k in KINDS)
    digests = ', '.join(f"`{r['digest']}`" for r in rep['rounds'])
    return (f"**{rep['procs']} process{'es' * (rep['procs'] > 1)}** (seed {rep['seed']}, {rep['iters']} steps a run): "
            f"{rep['faults_sent']} faults sent to a running run ({rep['in_training']} in training, the others in the "
            f"start-up; {rep['faults_not_counted']} more found the run ended and are not counted), {rep['resumes']} resumes, "
            f"{len(rep['rounds'])} runs to the end ({', '.join(str(r['faults']) for r in rep['rounds'])} faults each). "
            f"Final weights digests {digests}, uninterrupted run `{rep['reference_digest']}`: "
            f"{'all equal' if rep['digests_equal'] else 'DIFFERENT'}; metrics.jsonl "
            f"{'equal' if rep['metrics_equal'] else 'DIFFERENT'} (throughput and memory aside); problems found: "
            f"{len(rep['problems'])}.\n\n| fault | sent | exit statuses of ael-launch |\n|---|---|---|\n{rows}\n")


if __name__ == '__main__':
    a = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    a.add_argument('--procs', type=int, default=1); a.add_argument('--faults', type=int, default=50)
    a.add_argument('--seed', type=int); a.add_argument('--iters', type=int, default=40)
    a.add_argument('--work', help='work folder (default: a new temporary one)'); a.add_argument('--json')
    a.add_argument('--report', nargs='+', metavar='JSON', help='print the markdown of these reports, run nothing')
    args = a.parse_args()
    if args.report: print('\n'.join(markdown(json.loads(Path(f).read_text())) for f in args.report)); sys.exit(0)
    work = Path(args.work or tempfile.mkdtemp(prefix='ael-soak-'))
    rep = soak(work, args.procs, args.faults, args.seed, args.iters)
    rep['command'] = 'python ' + ' '.join(sys.argv)
    rep['code'] = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=REPO, capture_output=True, text=True).stdout.strip()
    if args.json: Path(args.json).parent.mkdir(parents=True, exist_ok=True); Path(args.json).write_text(json.dumps(rep, indent=1))
    ok = rep['digests_equal'] and rep['metrics_equal'] and not rep['problems'] and rep['faults_sent'] >= args.faults
    sys.exit(0 if ok else 1)

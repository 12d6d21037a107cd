"""Faults (issue 10): a diverged run fails without a poisoned checkpoint, DDP resume is exact for AEL, checkpoints
come on their own schedule, stop signals end a run with a checkpoint and exit status 75, a run folder belongs to one
run, partial writes are removed, a full disk is one line, metrics.jsonl stays valid and readable, and a resumed run
logs what an uninterrupted one logs."""
import errno, json, os, signal, socket, subprocess, sys, time
from pathlib import Path
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from ael_nb.core import DataError, EXIT_REQUEUE
from ael_nb.config import get_config
from ael_nb.plan import TINY
from ael_nb.state import read_checkpoint
from ael_nb.runlog import read_metrics
from ael_nb.faults import Diverged, NoSpace, Preempted
from ael_nb import methods as methods_mod
from ael_nb.train import Run, setup, train

torch.set_num_threads(1)
AEL = ['method.name=ael', 'optim.iters=8', 'run.log_interval=4']     # log lines at 4 and 8: a stop at 3 falls between them
ENV = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), OMP_NUM_THREADS='1')

def tiny(out, *extra): return get_config('cpu', overrides=TINY + [f'run.out={out}', *extra])

def strip(recs): return [{k: v for k, v in r.items() if k not in ('img_per_s', 'peak_mem_gb')} for r in recs]   # timings and memory vary

def assert_same_run(a: dict, b: dict, out_a, out_b):
    "Same final student, teacher and bank, and the same metrics.jsonl (throughput aside)."
    for k in ('it', 'weights', 'teacher_weights', 'conf'): assert a[k] == b[k], k
    assert strip(read_metrics(out_a)) == strip(read_metrics(out_b))

@pytest.fixture(scope='module')
def full(tmp_path_factory):
    "An uninterrupted 8-step AEL run to compare interrupted ones with."
    out = tmp_path_factory.mktemp('full') / 'run'
    return train(tiny(out, *AEL)), out

# A child process that trains and, after step `at`, kills itself (SIGKILL), sends itself a signal, or marks a file
# and slows down so that the parent can signal it. It turns `RunStopped` into one line and its exit status, as ael-train.
CHILD = r'''
import os, signal, sys, time
from ael_nb.config import get_config
from ael_nb.faults import RunStopped
from ael_nb.train import Run, train
mode, at, marker, overrides = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
step = Run.step
def patched(self, trace=None):
    r = step(self, trace)
    if self.it == at:
        if mode == 'wait': open(marker, 'w').close()
        else: os.kill(os.getpid(), getattr(signal, mode))
    if mode == 'wait' and self.it >= at: time.sleep(1.0)
    return r
Run.step = patched
try: train(get_config('cpu', overrides=overrides))
except RunStopped as e: print(f'ael-train: {e}', file=sys.stderr); sys.exit(e.exit_code)
'''

def child(tmp_path, mode, at, out, *extra, **kw):
    (tmp_path / 'child.py').write_text(CHILD)
    cmd = [sys.executable, str(tmp_path / 'child.py'), mode, str(at), str(tmp_path / 'ready')] + TINY + [f'run.out={out}', *extra]
    return subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


# 1. divergence
@pytest.mark.parametrize('policy', ['stop', 'skip'])
def test_diverged_run_fails_and_saves_nothing_poisoned(tmp_path, policy):
    with pytest.raises(Diverged, match=r'step \d+.*non-finite') as e:
        train(tiny(tmp_path, 'optim.lr=1e6', 'optim.iters=4', 'eval.interval=1', f'run.on_nonfinite={policy}'))
    assert e.value.exit_code == 1
    assert not (tmp_path / 'summary.json').exists()
    for name in ('latest.pth', 'best.pth'):                   # whatever was saved before the divergence is finite
        if (tmp_path / name).exists():
            ck = read_checkpoint(tmp_path / name)
            assert all(torch.isfinite(v).all() for m in ('student', 'teacher') for v in ck[m].values() if v.is_floating_point())

def test_nonfinite_step_skipped_on_request(tmp_path, monkeypatch):
    real = methods_mod.METHODS['ael']
    def nan_at_step_2(state, lb, ub, g, trace=None):
        loss, logs, rec = real(state, lb, ub, g, trace)
        return (loss * float('nan') if state.it == 1 else loss), logs, rec
    monkeypatch.setitem(methods_mod.METHODS, 'ael', nan_at_step_2)
    s = train(tiny(tmp_path, 'method.name=ael', 'optim.iters=3', 'run.on_nonfinite=skip'))
    assert s['it'] == 3
    recs = [r for r in read_metrics(tmp_path) if 'lr' in r]
    assert [r.get('skipped', 0) for r in recs] == [0, 1, 0] and 'loss' not in recs[1]

def test_nonfinite_weights_are_never_saved(tmp_path):
    with setup(tiny(tmp_path, 'method.name=supervised')) as run:
        run.step()
        p = next(run.state.student.parameters())
        with torch.no_grad(): p[(0,) * p.ndim] = float('inf')          # (channels-last weights cannot be viewed flat)
        with pytest.raises(Diverged, match='step 1: the student holds non-finite weights'): run.save()
    assert not (tmp_path / 'latest.pth').exists()


# 2. DDP resume
def _ddp_worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), OMP_NUM_THREADS='1')
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=world)
    ov = TINY + ['data.batch_size=4', 'optim.iters=10', 'eval.max_images=3', 'method.name=ael', 'run.device=cpu', 'run.log_interval=3']
    res = dict(full=train(get_config('cpu', overrides=ov + [f'run.out={out}/full'])),
               part=train(get_config('cpu', overrides=ov + [f'run.out={out}/part', 'run.stop_at=5'])),
               rest=train(get_config('cpu', overrides=ov + [f'run.out={out}/part', 'run.resume=true'])))
    step = Run.step
    def sigterm_to_rank_1(self, trace=None):                   # a signal that reaches one rank only
        r = step(self, trace)
        if self.it == 2 and rank == 1: os.kill(os.getpid(), signal.SIGTERM)
        return r
    Run.step = sigterm_to_rank_1
    try: train(get_config('cpu', overrides=ov + [f'run.out={out}/sig']))
    except Preempted as e: stopped = str(e)
    Run.step = step
    res['sig'] = train(get_config('cpu', overrides=ov + [f'run.out={out}/sig', 'run.resume=true']))
    Path(out, f'rank{rank}.json').write_text(json.dumps({k: dict(it=s['it'], weights=s['weights'], teacher=s['teacher_weights'],
                                                                 conf=s['conf']) for k, s in res.items()} | dict(stopped=stopped)))
    dist.destroy_process_group()

@pytest.mark.slow
def test_ddp_stop_and_resume_equals_uninterrupted(tmp_path):
    "stop_at=5 then resume; a SIGTERM to rank 1 alone: both ranks stop after the same step, and both resume exactly."
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]
    mp.spawn(_ddp_worker, args=(2, port, str(tmp_path)), nprocs=2, join=True)
    r = [json.loads((tmp_path / f'rank{i}.json').read_text()) for i in (0, 1)]
    assert r[0]['part']['it'] == 5 and r[0]['rest']['it'] == r[0]['full']['it'] == 10
    assert r[0]['rest'] == r[0]['full'] == r[1]['rest'] == r[1]['full']     # weights, teacher, bank: every rank
    assert r[0]['stopped'].startswith('a stop signal to another rank at step 3') and r[1]['stopped'].startswith('SIGTERM at step 3')
    assert r[0]['sig'] == r[1]['sig'] == r[0]['full']                       # both stopped at step 3 and resumed exactly
    assert len(read_checkpoint(tmp_path / 'part' / 'latest.pth')['ranks']) == 2    # each rank's ACM draw is kept
    assert strip(read_metrics(tmp_path / 'part')) == strip(read_metrics(tmp_path / 'full'))


# 3. checkpoints without evaluations
def test_kill_between_evaluations_leaves_a_checkpoint(tmp_path):
    ov = ['method.name=supervised', 'optim.iters=20', 'eval.interval=0', 'run.checkpoint_interval=5']
    p = child(tmp_path, 'SIGKILL', 15, tmp_path / 'part', *ov)    # kill -9 after step 15, before its checkpoint
    p.communicate(timeout=300)
    assert p.returncode == -signal.SIGKILL
    assert read_checkpoint(tmp_path / 'part' / 'latest.pth')['it'] == 10
    rest = train(tiny(tmp_path / 'part', *ov, 'run.resume=true'))
    full = train(tiny(tmp_path / 'full', *ov))
    assert_same_run(rest, full, tmp_path / 'part', tmp_path / 'full')


# 4. stop signals
def test_sigterm_checkpoints_and_exits_for_requeue(tmp_path, full):
    p = child(tmp_path, 'SIGTERM', 2, tmp_path / 'run', *AEL)     # sent after step 2: step 3 finishes, then the stop
    _, err = p.communicate(timeout=300)
    assert p.returncode == EXIT_REQUEUE == 75, err
    line = err.strip().splitlines()[-1]
    assert line.startswith('ael-train: SIGTERM at step 3 of 8:') and 'Traceback' not in err
    cmd = line.split('resume with: ')[1]
    assert cmd == f"ael-train --config {(tmp_path / 'run' / 'config.yaml').resolve()} --out {(tmp_path / 'run').resolve()} --resume"
    assert read_checkpoint(tmp_path / 'run' / 'latest.pth')['it'] == 3
    rest = train(tiny(tmp_path / 'run', *AEL, 'run.resume=true'))
    assert_same_run(rest, full[0], tmp_path / 'run', full[1])

def test_sigusr1_in_process(tmp_path, full, monkeypatch):
    step = Run.step
    def signal_after_4(self, trace=None):
        r = step(self, trace)
        if self.it == 4: os.kill(os.getpid(), signal.SIGUSR1)
        return r
    monkeypatch.setattr(Run, 'step', signal_after_4)
    with pytest.raises(Preempted, match='SIGUSR1 at step 5 of 8') as e: train(tiny(tmp_path, *AEL))
    assert e.value.exit_code == EXIT_REQUEUE and signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL
    monkeypatch.undo()
    assert_same_run(train(tiny(tmp_path, *AEL, 'run.resume=true')), full[0], tmp_path, full[1])

def test_ctrl_c_with_loader_workers_and_a_second_run_at_once(tmp_path, full):
    "Ctrl-C reaches the whole process group (DataLoader workers too); meanwhile a second run into the folder is refused."
    out = tmp_path / 'run'
    p = child(tmp_path, 'wait', 2, out, *AEL, 'data.num_workers=1', start_new_session=True)
    t0 = time.time()
    while not (tmp_path / 'ready').exists():
        assert p.poll() is None and time.time() - t0 < 300, p.communicate()
        time.sleep(0.1)
    with pytest.raises(DataError, match=f'in use by process {p.pid} on'): train(tiny(out, *AEL, 'run.resume=true'))
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=300)
    assert p.returncode == EXIT_REQUEUE, err
    assert 'SIGINT at step' in err and 'Traceback' not in err
    it = read_checkpoint(out / 'latest.pth')['it']
    assert 2 <= it < 8 and not (out / '.lock').exists()
    assert_same_run(train(tiny(out, *AEL, 'run.resume=true')), full[0], out, full[1])


# 5. one run per folder
def test_reused_out_is_refused_unless_resumed_or_overwritten(tmp_path):
    train(tiny(tmp_path, 'method.name=supervised'))                 # evaluates at its end: best.pth
    with pytest.raises(DataError, match='holds another run .*run.overwrite=true'): train(tiny(tmp_path, 'method.name=supervised'))
    s = train(tiny(tmp_path, 'method.name=supervised', 'run.overwrite=true', 'run.stop_at=1'))
    assert s['it'] == 1 and not (tmp_path / 'best.pth').exists()    # nothing of the first run is left
    assert [r['it'] for r in read_metrics(tmp_path)] == [1]

def test_stale_lock_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True, text=True)
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / '.lock').write_text(json.dumps(dict(host=socket.gethostname(), pid=int(dead.stdout))))
    assert train(tiny(tmp_path, 'method.name=supervised', 'optim.iters=1'))['it'] == 1
    assert not (tmp_path / '.lock').exists()


# 6. partial writes
def test_partial_writes_removed_on_resume(tmp_path):
    train(tiny(tmp_path, 'method.name=supervised', 'run.stop_at=1'))
    junk = [tmp_path / '.latest.pth.k3j2.tmp', tmp_path / '.best.pth.x1.tmp']
    for j in junk: j.write_bytes(b'\0' * 1000)
    train(tiny(tmp_path, 'method.name=supervised', 'run.resume=true'))
    assert not any(j.exists() for j in junk)


# 7. full disk
def test_full_disk_is_one_line_and_keeps_the_checkpoint(tmp_path, monkeypatch):
    real, calls = torch.save, []
    def save(obj, f, *a, **k):
        calls.append(1)
        if len(calls) == 2: f.write(b'part of a checkpoint'); raise OSError(errno.ENOSPC, 'No space left on device')
        return real(obj, f, *a, **k)
    monkeypatch.setattr(torch, 'save', save)
    with pytest.raises(NoSpace) as e: train(tiny(tmp_path, 'method.name=supervised', 'optim.iters=3', 'run.checkpoint_interval=1'))
    monkeypatch.undo()
    assert str(e.value) == f"{tmp_path / 'latest.pth'}: no space left on device" and e.value.exit_code == 1
    assert read_checkpoint(tmp_path / 'latest.pth')['it'] == 1                # the previous checkpoint
    assert not list(tmp_path.glob('.*.tmp')) and not (tmp_path / '.lock').exists()


# 8. metrics.jsonl
def test_torn_metrics_line_does_not_block_resume(tmp_path, full):
    train(tiny(tmp_path, *AEL, 'run.stop_at=4', 'eval.interval=4'))
    with open(tmp_path / 'metrics.jsonl', 'a') as f: f.write('{"it": 5, "loss": 0.7')   # killed while appending
    with pytest.warns(UserWarning, match='torn last line'):
        rest = train(tiny(tmp_path, *AEL, 'run.resume=true', 'eval.interval=4'))
    assert rest['weights'] == full[0]['weights']
    strict = lambda c: pytest.fail(f'{c} in metrics.jsonl is not JSON')
    recs = [json.loads(l, parse_constant=strict) for l in (tmp_path / 'metrics.jsonl').read_text().splitlines()]
    assert [r['it'] for r in recs] == [4, 4, 8, 8]                 # train/eval lines, nothing torn
    assert any(v is None for r in recs if 'eval' in r for v in r['eval']['teacher']['per_class'].values())   # NaN IoU -> null


# 9. the log of a resumed run
def test_resumed_log_averages_like_the_uninterrupted_one(tmp_path, full):
    train(tiny(tmp_path, *AEL, 'run.stop_at=3'))
    assert read_metrics(tmp_path) == []                             # no line at the stop: steps 1-3 wait in the checkpoint
    assert_same_run(train(tiny(tmp_path, *AEL, 'run.resume=true')), full[0], tmp_path, full[1])


def test_a_checkpoint_of_an_earlier_version_resumes_exactly(tmp_path):
    """A latest.pth in the form written before eb22e35 (no `ranks`: one process's `rng` and `acm_next` at the top level)
    and 14bfe5e (no digest) is upgraded where it is read (`ael_nb.state.upgrade_checkpoint`): the resumed run ends
    with the uninterrupted run's weights and bank (its first log line lacks the steps before the stop, which that
    form did not keep). Those versions kept no labeled memory, so both runs take the paper's ACP and ACM sources."""
    paper = [*AEL, 'method.cp_source=batch', 'method.acm_fallback=box']
    whole = train(tiny(tmp_path / 'whole', *paper))
    run = tmp_path / 'run'
    train(tiny(run, *paper, 'run.stop_at=3'))
    ck = read_checkpoint(run / 'latest.pth'); one = ck.pop('ranks')[0]
    assert set(one) == {'rng', 'acm_next', 'acc'}                    # nothing the earlier form would lose
    torch.save(dict(ck, rng=one['rng'], acm_next=one['acm_next']), run / 'latest.pth')
    with pytest.warns(UserWarning, match='latest.pth: written before checkpoints carried a digest'):
        rest = train(tiny(run, *paper, 'run.resume=true'))
    for k in ('it', 'weights', 'teacher_weights', 'conf'): assert rest[k] == whole[k], k


def test_full_disk_leaves_no_torn_metrics_line(tmp_path):
    "A real full disk (a small tmpfs, filled) while metrics.jsonl is appended: NoSpace, and the file as it was, no torn line."
    from ael_nb.runlog import RunLog
    disk = tmp_path / 'disk'; disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', str(disk)]).returncode:
        if os.environ.get('CI') == 'true': pytest.fail('CI runs the full-disk test: it mounts a tmpfs, as root')
        pytest.skip('a full disk needs a tmpfs mount (root)')
    try:
        log = RunLog(disk, tensorboard=False)
        log.write(dict(it=1, loss=1.0))
        before = (disk / 'metrics.jsonl').read_bytes()
        st = os.statvfs(disk)
        with open(disk / 'filler', 'wb') as f:              # all but a few bytes: the next line starts, then meets ENOSPC
            try: f.write(b'x' * (st.f_bavail * st.f_frsize - 4096 + 40))
            except OSError: pass
        with pytest.raises(NoSpace, match='metrics.jsonl: no space left on device'):
            for it in range(2, 200): log.write(dict(it=it, loss=1.0, note='y' * 500))
        text = (disk / 'metrics.jsonl').read_text()
        assert text.startswith(before.decode()) and text.endswith('\n')
        assert [r['it'] for r in map(json.loads, text.splitlines())] == list(range(1, len(text.splitlines()) + 1))
    finally:
        subprocess.run(['umount', str(disk)])

"""Stop signals under torchrun and ael-launch, 2 gloo ranks on the CPU: a signal to the launcher's process group
reaches every training process, the job exits 75 after the checkpoint, no process outlives its launcher, and ael-launch
returns only after the ranks' checkpoint is written even when torchrun ends first. A Ctrl-C while a console script
still imports torch is one line too."""
import os, re, signal, socket, subprocess, sys, time
from pathlib import Path
import pytest
from ael_nb.core import EXIT_REQUEUE
from ael_nb.faults import descendants
from ael_nb.plan import TINY
from ael_nb.state import read_checkpoint

BIN = Path(sys.executable).parent
ENV = dict(os.environ, OMP_NUM_THREADS='1', PATH=f"{BIN}:{os.environ['PATH']}", PYTHONPATH=str(Path(__file__).resolve().parents[1]))
LONG = TINY + ['data.batch_size=4', 'optim.iters=200', 'run.log_interval=1']   # long enough to be stopped in the middle


def _free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def alive(pids) -> list[int]:
    "Those of `pids` still running (zombies count as ended)."
    out = []
    for p in pids:
        try: state = Path(f'/proc/{p}/stat').read_text().rsplit(')', 1)[1].split()[0]
        except OSError: continue
        if state != 'Z': out.append(p)
    return out

def start(cmd, run_dir: Path, steps: int = 2):
    "Start `cmd` in its own process group and wait until `run_dir` logged `steps` steps; returns the process and its descendants."
    p = subprocess.Popen(cmd, env=ENV, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    m, t0 = run_dir / 'metrics.jsonl', time.time()
    while not (m.is_file() and len(m.read_text().splitlines()) >= steps):
        assert p.poll() is None and time.time() - t0 < 300, p.communicate()
        time.sleep(0.2)
    return p, descendants(p.pid)

def assert_stopped_cleanly(out: Path, procs, iters: int = 200):
    time.sleep(0.5)
    assert alive(procs) == [], f'processes outlived their launcher: {alive(procs)}'
    assert 0 < read_checkpoint(out / 'latest.pth')['it'] < iters and not (out / '.lock').exists()


def torch_mapped(pid: int) -> bool:
    "Has process `pid` mapped torch's library (its `import torch` is under way or done)?"
    try: return 'libtorch' in Path(f'/proc/{pid}/maps').read_text()
    except OSError: return False

@pytest.mark.parametrize('script', ['ael-train', 'ael-launch'])
def test_ctrl_c_while_torch_imports_is_one_line(tmp_path, script):
    """Ctrl-C to the script's process group as soon as torch's library is mapped, while torch still imports and no
    handler of the kit's is up: one line, exit status 130 as a shell reports Ctrl-C, no traceback, no run folder."""
    where = [f'run.out={tmp_path}/run'] if script == 'ael-train' else ['--gpus', '1', '--out-root', str(tmp_path)]
    # Ctrl-C as a terminal delivers it: a test run in the background (nohup, `&`) passes SIGINT on ignored
    p = subprocess.Popen([script, '--preset', 'cpu', *where, *TINY], env=ENV, start_new_session=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    t0 = time.time()
    while not torch_mapped(p.pid):
        assert p.poll() is None and time.time() - t0 < 60, p.communicate()
        time.sleep(0.005)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (130, f'{script}: interrupted while starting; nothing was written\n')
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize('sig', ['SIGUSR1', 'SIGTERM'])
def test_ael_launch_group_signal_exits_75(tmp_path, sig):
    "kill -<sig> to ael-launch's process group: both ranks checkpoint, ael-launch exits 75 with no traceback, nothing is left running."
    out = tmp_path / 'cpu' / 'drawn_seed0'
    p, procs = start(['ael-launch', '--preset', 'cpu', '--gpus', '2', '--out-root', str(tmp_path)] + LONG, out)
    assert len(procs) >= 3                                     # torchrun and its two training processes
    os.killpg(p.pid, getattr(signal, sig))
    _, err = p.communicate(timeout=300)
    assert p.returncode == EXIT_REQUEUE, err
    assert 'Traceback' not in err and f'exited with status {EXIT_REQUEUE}' in err
    assert_stopped_cleanly(out, procs)


@pytest.mark.slow
@pytest.mark.parametrize('sig', ['SIGUSR1', 'SIGTERM'])
def test_ael_launch_returns_after_the_checkpoint_when_torchrun_ends_first(tmp_path, sig):
    """<sig> to ael-launch's group and torchrun killed at once (as a scheduler or an unhandled signal ends it): ael-launch returns
    only after both ranks ended and latest.pth holds the step they stopped at; it exits 75, and a second launch resumes."""
    out = tmp_path / 'cpu' / 'drawn_seed0'
    cmd = ['ael-launch', '--preset', 'cpu', '--gpus', '2', '--out-root', str(tmp_path)] + LONG
    p, procs = start(cmd, out)
    torchrun = procs[0]                                         # ael-launch's one child
    assert 'torchrun' in Path(f'/proc/{torchrun}/cmdline').read_text()
    os.killpg(p.pid, getattr(signal, sig)); os.kill(torchrun, signal.SIGKILL)
    _, err = p.communicate(timeout=300)
    left = alive(procs)                                         # at the moment ael-launch returned
    assert p.returncode == EXIT_REQUEUE and left == [], (p.returncode, left, err)
    stopped = int(re.search(r'SIG\w+ at step (\d+) of', err).group(1))   # rank 0's own words: which step it saved
    assert read_checkpoint(out / 'latest.pth')['it'] == stopped
    if sig != 'SIGUSR1': return                                 # the resume is the same after either signal
    r = subprocess.run(cmd + [f'run.stop_at={stopped + 1}'], env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and '--resume' in r.stdout, r.stderr
    assert read_checkpoint(out / 'latest.pth')['it'] == stopped + 1


@pytest.mark.slow
def test_plain_torchrun_killed_by_usr1_leaves_no_orphan(tmp_path):
    "torchrun dies of an unhandled SIGUSR1 at once; its training processes (own sessions) still stop with a checkpoint, none keeps training."
    out = tmp_path / 'run'
    cmd = ['torchrun', '--nproc_per_node', '2', '--standalone', '--no-python', 'ael-train', '--out', str(out)] + LONG
    p, procs = start(cmd, out)
    os.killpg(p.pid, signal.SIGUSR1)
    p.communicate(timeout=60)
    assert p.returncode in (-signal.SIGUSR1, 128 + signal.SIGUSR1)    # torchrun's own status: not ours to change
    t0 = time.time()
    while alive(procs) and time.time() - t0 < 120: time.sleep(0.5)
    assert_stopped_cleanly(out, procs)


@pytest.mark.slow
def test_two_nodes_one_signalled(tmp_path):
    "Two ael-launch 'nodes' (static rendezvous, one rank each): SIGTERM to one node's launcher stops both after one checkpoint, both exit 75."
    port, out = _free_port(), tmp_path / 'cpu' / 'drawn_seed0'
    cmd = lambda r: ['ael-launch', '--preset', 'cpu', '--gpus', '1', '--nnodes', '2', '--node-rank', str(r), '--rdzv-endpoint',
                     f'127.0.0.1:{port}', '--out-root', str(tmp_path)] + LONG
    second = subprocess.Popen(cmd(1), env=ENV, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first, procs = start(cmd(0), out)
    procs += descendants(second.pid)
    os.kill(first.pid, signal.SIGTERM)                          # the launcher alone, as a scheduler's kill does
    _, err0 = first.communicate(timeout=300); _, err1 = second.communicate(timeout=300)
    assert (first.returncode, second.returncode) == (EXIT_REQUEUE, EXIT_REQUEUE), (err0, err1)
    assert_stopped_cleanly(out, procs)


@pytest.mark.slow
def test_launcher_killed_outright_takes_its_ranks_along(tmp_path):
    "SIGKILL to ael-launch (no handler can run): torchrun and the training processes still stop, with a checkpoint."
    out = tmp_path / 'cpu' / 'drawn_seed0'
    p, procs = start(['ael-launch', '--preset', 'cpu', '--gpus', '2', '--out-root', str(tmp_path)] + LONG, out)
    p.kill(); p.communicate(timeout=60)
    t0 = time.time()
    while alive(procs) and time.time() - t0 < 120: time.sleep(0.5)
    assert_stopped_cleanly(out, procs)


@pytest.mark.slow
def test_term_to_every_process_is_one_line_not_a_traceback(tmp_path):
    """SIGTERM to ael-launch, torchrun and both ranks at once (what SLURM's scancel sends, and SIGKILL after KillWait):
    the ranks checkpoint, torchrun dies without a traceback, ael-launch exits 75 after the checkpoint."""
    out = tmp_path / 'cpu' / 'drawn_seed0'
    p, procs = start(['ael-launch', '--preset', 'cpu', '--gpus', '2', '--out-root', str(tmp_path)] + LONG, out)
    for pid in [p.pid] + procs: os.kill(pid, signal.SIGTERM)
    _, err = p.communicate(timeout=300)
    assert p.returncode == EXIT_REQUEUE and 'Traceback' not in err, err
    assert_stopped_cleanly(out, procs)


@pytest.mark.slow
def test_stop_while_the_ranks_start_is_one_line(tmp_path):
    """SIGTERM to ael-launch and torchrun as soon as the ranks exist (still importing torch, as SLURM's scancel can
    find them): each rank hears the stop once it can handle it and ends with one line, ael-launch exits 75."""
    out = tmp_path / 'cpu' / 'drawn_seed0'
    p = subprocess.Popen(['ael-launch', '--preset', 'cpu', '--gpus', '2', '--out-root', str(tmp_path)] + LONG, env=ENV,
                         start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while len(procs := descendants(p.pid)) < 3:                # torchrun and its two ranks
        assert p.poll() is None and time.time() - t0 < 300, p.communicate()
        time.sleep(0.02)
    for pid in [p.pid] + procs: os.kill(pid, signal.SIGTERM)
    _, err = p.communicate(timeout=300)
    assert p.returncode == EXIT_REQUEUE and 'Traceback' not in err, err
    assert 'SIGTERM before training started' in err or 'SIGTERM at step' in err, err
    time.sleep(0.5)
    assert alive(procs) == [] and not (out / '.lock').exists()

"""`ael-launch --slurm` on a real one-node SLURM cluster (tests/slurm/cluster.sh: munged, slurmctld, slurmd on loopback,
a fake GPU GRES): the script is submitted as written, a task stopped by USR1 or requeued by SLURM resumes to the
digest of an uninterrupted run, `scancel` stops a job for good with its checkpoint kept, a failing run is not requeued."""
import json, os, re, shutil, signal, subprocess, sys, time
from pathlib import Path
import pytest
from ael_nb.plan import TINY
from ael_nb.config import get_config
from ael_nb.state import read_checkpoint
from ael_nb.train import train

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / 'tests' / 'slurm' / 'cluster.sh'
BIN = Path(sys.executable).parent
ITERS = 30
RUN = TINY + [f'optim.iters={ITERS}', 'run.log_interval=1']     # long enough to be stopped in the middle


@pytest.fixture(scope='session')
def slurm(tmp_path_factory):
    "The environment of a running one-node cluster (SLURM_CONF); skips with the reason where it cannot start, fails in CI."
    d = tmp_path_factory.mktemp('slurm-cluster')
    missing = [b for b in ('munged', 'slurmctld', 'slurmd', 'sbatch') if not shutil.which(b)]
    why = (f"{', '.join(missing)} not installed (apt-get install slurm-wlm munge)" if missing
           else 'the cluster runs jobs as their users: needs root' if os.geteuid() != 0 else None)
    if why is None:
        r = subprocess.run(['bash', str(CLUSTER), 'start', str(d)], capture_output=True, text=True, timeout=120)
        why = None if r.returncode == 0 else f"the SLURM daemons did not start: {r.stderr.strip()[-600:]}"
    if why:
        if os.environ.get('CI') == 'true': pytest.fail(f"CI runs the SLURM tests: {why}")
        pytest.skip(why)
    env = dict(os.environ, SLURM_CONF=str(d / 'slurm.conf'), PATH=f"{BIN}:{os.environ['PATH']}", PYTHONPATH=str(REPO),
               OMP_NUM_THREADS='1')
    yield env
    subprocess.run(['bash', str(CLUSTER), 'stop', str(d)], capture_output=True, timeout=60)


def sh(env, *cmd, check=True) -> str:
    r = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 or not check, (cmd, r.stdout, r.stderr)
    return r.stdout + r.stderr


def job(env, jid) -> dict:
    "`scontrol show job` of one job (an array task: JOBID_TASK) as a dict; {} once SLURM forgot it."
    out = sh(env, 'scontrol', '-o', 'show', 'job', jid, check=False)
    return dict(re.findall(r'(\w+)=(\S*)', out.splitlines()[0])) if 'JobId=' in out else {}


def wait_for(what, cond, timeout=900, poll=0.5):   # a loaded 2-core machine starts a tiny run in a minute or more
    t0 = time.time()
    while not (v := cond()):
        assert time.time() - t0 < timeout, f"timed out waiting for {what}"
        time.sleep(poll)
    return v


def submit(env, tmp_path, run=RUN) -> tuple[str, list[Path], Path]:
    "Write the CPU preset's two-seed array with ael-launch, submit it as written; the job id, the run folders, the logs."
    r = subprocess.run(['ael-launch', '--preset', 'cpu', '--seeds', '0-1', '--slurm', 'job.sh', '--time', '00:30:00',
                        '--signal-secs', '5', '--out-root', 'runs', *run], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = sh(env, 'sbatch', '--parsable', tmp_path / 'job.sh')      # from another folder: --chdir holds the paths
    return out.strip().split(';')[0], [tmp_path / 'runs' / 'cpu' / f'drawn_seed{s}' for s in (0, 1)], tmp_path / 'runs' / 'slurm'


def steps(run: Path) -> int:
    m = run / 'metrics.jsonl'
    return len(m.read_text().splitlines()) if m.is_file() else 0


def log_of(logs: Path, jid: str, task: int) -> str:
    return (logs / f'ael_{jid}_{task}.out').read_text()


def digest(tmp_path, seed: int) -> str:
    "The final weights of the same run, trained here without a stop."
    return train(get_config('cpu', overrides=RUN + [f'run.seed={seed}', f'run.out={tmp_path / f"ref{seed}"}']))['weights']


@pytest.mark.slow
def test_gpu_preset_script_accepted_by_sbatch(slurm, tmp_path):
    "The GPU preset's script passes `sbatch --test-only` where the node declares GPUs; more GPUs than the node has do not."
    base = ['ael-launch', '--preset', 'cityscapes', '--data-root', '/data/cityscapes', '--manifest',
            str(REPO / 'data_manifests/cityscapes/unimatch_1_16.json'), '--seeds', '0-1', '--cpus-per-proc', '1', '--slurm']
    for gpus in (2, 3):
        r = subprocess.run(base + [f'job{gpus}.sh', '--gpus', str(gpus)], env=slurm, cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert f'#SBATCH --gpus-per-node={gpus}' in (tmp_path / f'job{gpus}.sh').read_text()
    ok = subprocess.run(['sbatch', '--test-only', 'job2.sh'], env=slurm, cwd=tmp_path, capture_output=True, text=True)
    assert ok.returncode == 0 and 'to start at' in ok.stderr, ok.stderr
    too_many = subprocess.run(['sbatch', '--test-only', 'job3.sh'], env=slurm, cwd=tmp_path, capture_output=True, text=True)
    assert too_many.returncode != 0, too_many.stderr


@pytest.mark.slow
def test_usr1_and_slurm_requeue_resume_to_the_same_weights(slurm, tmp_path):
    """Task 0 gets USR1 (what --signal=B:USR1@N sends before the time limit): it checkpoints and the script requeues it.
    Task 1 is requeued by SLURM (`scontrol requeue`, SIGTERM to the job): it checkpoints, the script does not requeue it
    again. Both come back (StartTime=now instead of SLURM's two-minute BeginTime), resume, and end with the weights of
    an uninterrupted run."""
    jid, runs, logs = submit(slurm, tmp_path)
    wait_for('both tasks training', lambda: all(steps(r) >= 2 for r in runs))
    sh(slurm, 'scancel', '--signal=USR1', '--batch', f'{jid}_0')
    sh(slurm, 'scontrol', 'requeue', f'{jid}_1')
    for t in (0, 1):
        wait_for(f'task {t} requeued', lambda: job(slurm, f'{jid}_{t}').get('Restarts') == '1'
                 and job(slurm, f'{jid}_{t}').get('JobState') == 'PENDING')
        stopped = read_checkpoint(runs[t] / 'latest.pth')['it']
        assert 0 < stopped < ITERS
        info = job(slurm, f'{jid}_{t}')
        assert info['Reason'] == 'BeginTime', info                         # SLURM holds a requeued job back
        sh(slurm, 'scontrol', 'update', f'jobid={jid}_{t}', 'StartTime=now')
    for t in (0, 1):
        info = wait_for(f'task {t} done', lambda: (j := job(slurm, f'{jid}_{t}')).get('JobState') in ('COMPLETED', 'FAILED', 'CANCELLED') and j)
        assert (info['JobState'], info['ExitCode'], info['Restarts']) == ('COMPLETED', '0:0', '1'), info
    refs = [digest(tmp_path, s) for s in (0, 1)]
    for t in (0, 1):
        summary = json.loads((runs[t] / 'summary.json').read_text())
        assert (summary['it'], summary['weights']) == (ITERS, refs[t]), t
        log = log_of(logs, jid, t)
        assert 'restart 0:' in log and 'restart 1:' in log and '--resume' in log.split('restart 1:')[1], log
        assert 'Traceback' not in log, log
    assert 'requeueing job' in log_of(logs, jid, 0)                          # USR1: the script requeued it
    assert 'requeueing job' not in log_of(logs, jid, 1) and 'stopped by SIGTERM' in log_of(logs, jid, 1)


@pytest.mark.slow
def test_scancel_stops_the_job_for_good(slurm, tmp_path):
    "`scancel` of the whole array: both tasks checkpoint and stop, stay stopped, and each log ends with one line."
    jid, runs, logs = submit(slurm, tmp_path)
    wait_for('both tasks training', lambda: all(steps(r) >= 2 for r in runs))
    sh(slurm, 'scancel', jid)
    for t in (0, 1):
        wait_for(f'task {t} ended', lambda: job(slurm, f'{jid}_{t}').get('JobState') not in ('RUNNING', 'COMPLETING', 'PENDING'))
    wait_for('the checkpoints', lambda: all(not (r / '.lock').exists() for r in runs), timeout=60)
    time.sleep(5)                                                             # a requeue would show by now
    for t in (0, 1):
        info = job(slurm, f'{jid}_{t}')
        assert (info['JobState'], info['Restarts']) == ('CANCELLED', '0'), info
        assert 0 < read_checkpoint(runs[t] / 'latest.pth')['it'] < ITERS and not (runs[t] / 'summary.json').exists()
        log = log_of(logs, jid, t)
        assert 'Traceback' not in log and 'requeue' not in log.lower().replace('not requeued', ''), log
        assert log.rstrip().splitlines()[-1].startswith('ael-launch: stopped by SIGTERM'), log


@pytest.mark.slow
def test_failing_run_is_not_requeued(slurm, tmp_path):
    "A run that fails on its own (its images folder lacks classes.yaml): the task fails with the run's status, no requeue."
    (tmp_path / 'images').mkdir()
    folder = [o for o in RUN if not o.startswith('data.synthetic')] + ['data.dataset=folder', f'data.root={tmp_path / "images"}']
    jid, runs, logs = submit(slurm, tmp_path, folder)
    for t in (0, 1):
        info = wait_for(f'task {t} ended', lambda: (j := job(slurm, f'{jid}_{t}')).get('JobState') in ('COMPLETED', 'FAILED', 'CANCELLED') and j)
        assert (info['JobState'], info['ExitCode'], info['Restarts']) == ('FAILED', '2:0', '0'), info
        log = log_of(logs, jid, t)
        assert 'requeueing' not in log and 'classes.yaml: classes file is missing' in log, log

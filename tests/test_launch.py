"ael-launch: dry-run output, the SLURM script (requeue and resume, run by bash: the real ael-launch over a fake torchrun, a fake scontrol), a real 2-process gloo run."
import json, os, shlex, signal, subprocess, sys, time
from pathlib import Path
import pytest
from ael_nb.core import EXIT_REQUEUE
from ael_nb.config import save_config
from ael_nb.launch import SlurmJob, ael_launch, plan_runs, resolve, slurm_script, torchrun_argv

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
from ael_nb.plan import TINY as _TINY
TINY = _TINY + ['data.batch_size=4']        # two ranks, two labeled images each
CS = ['--preset', 'cityscapes', '--data-root', '/data/cityscapes', '--manifest', 'data_manifests/cityscapes/unimatch_1_16.json']


def test_dry_run_prints_torchrun(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert ael_launch(CS + ['--gpus', '8', '--seeds', '0-2', '--dry-run']) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    for seed, line in enumerate(lines):
        cmd = shlex.split(line)
        assert cmd[:6] == ['torchrun', '--nproc_per_node', '8', '--standalone', '--no-python', 'ael-train']
        assert cmd[cmd.index('--seed') + 1] == str(seed)
        assert cmd[cmd.index('--out') + 1] == f'runs/cityscapes/unimatch_1_16_seed{seed}'
        assert cmd[cmd.index('--manifest') + 1] == 'data_manifests/cityscapes/unimatch_1_16.json'


def test_dry_run_several_nodes(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert ael_launch(CS + ['--gpus', '4', '--nnodes', '2', '--rdzv-endpoint', 'n1:29400', '--rdzv-id', 'j1', '--dry-run']) == 0
    assert '--nnodes 2 --rdzv_backend c10d --rdzv_endpoint n1:29400 --rdzv_id j1' in capsys.readouterr().out
    assert ael_launch(CS + ['--gpus', '4', '--nnodes', '2', '--rdzv-endpoint', 'n1:29400', '--node-rank', '1', '--dry-run']) == 0
    assert '--nnodes 2 --node_rank 1 --master_addr n1 --master_port 29400' in capsys.readouterr().out


def test_errors_are_one_line(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert ael_launch(['--preset', 'cityscapes', '--manifest', 'data_manifests/cityscapes/1-16_fold0.json', '--dry-run']) == 2
    assert 'data_manifests/cityscapes/1-16_fold0.json: no such manifest' in capsys.readouterr().err
    assert ael_launch(CS + ['--gpus', '2', '--nnodes', '2', '--dry-run']) == 2
    assert 'rendezvous endpoint' in capsys.readouterr().err
    assert ael_launch(CS + ['method.gama=1', '--dry-run']) == 2
    assert 'method.gama' in capsys.readouterr().err


def test_slurm_script_content(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    f = tmp_path / 'job.sh'
    assert ael_launch(CS + ['--gpus', '8', '--seeds', '0-1', '--slurm', str(f), '--time', '12:00:00', '--signal-secs', '300',
                            '--partition', 'gpu']) == 0
    assert f'sbatch {f}' in capsys.readouterr().out
    s = f.read_text()
    for line in ['#SBATCH --signal=B:USR1@300', '#SBATCH --requeue', '#SBATCH --time=12:00:00', '#SBATCH --array=0-1',
                 '#SBATCH --partition=gpu', '#SBATCH --gpus-per-node=8', f'EXIT_REQUEUE={EXIT_REQUEUE}',
                 'scontrol requeue "$SLURM_JOB_ID"', "trap 'forward USR1' USR1", "trap 'forward TERM' TERM",
                 f'#SBATCH --chdir={REPO}', '#SBATCH --cpus-per-task=32']:
        assert line in s, line
    assert subprocess.run(['bash', '-n', str(f)]).returncode == 0


def test_slurm_cpu_preset_asks_for_cores_and_makes_its_log_folder(tmp_path, monkeypatch, capsys):
    "The CPU preset: no GPU line, --cpus-per-task = processes x run.threads, the log folder made before any sbatch."
    monkeypatch.chdir(tmp_path)
    assert ael_launch(['--preset', 'cpu', '--gpus', '2', '--seeds', '0-1', '--slurm', 'job.sh', '--out-root', 'r', 'run.threads=3']) == 0
    s = (tmp_path / 'job.sh').read_text()
    assert 'gpu' not in s.replace('--gpus 2', '') and '#SBATCH --cpus-per-task=6' in s and 'OMP_NUM_THREADS:-3' in s, s
    assert '#SBATCH --output=r/slurm/%x_%A_%a.out' in s and (tmp_path / 'r' / 'slurm').is_dir()
    assert ael_launch(['--preset', 'cpu', '--slurm', 'j2.sh', '--cpus-per-proc', '2']) == 0
    assert '#SBATCH --cpus-per-task=2' in (tmp_path / 'j2.sh').read_text()


def _fake_bin(d: Path, torchrun_body: str):
    "A PATH folder with a fake `torchrun` (records its arguments) and a fake `scontrol` (records requeues)."
    d.mkdir()
    (d / 'torchrun').write_text(f'#!/bin/bash\necho "$@" >> "$FAKE_LOG/args"\n{torchrun_body}\n')
    (d / 'scontrol').write_text('#!/bin/bash\nif [ "$1" = show ]; then echo node1; else echo "$@" >> "$FAKE_LOG/scontrol"; fi\n')
    for f in d.iterdir(): f.chmod(0o755)


def _run_script(tmp_path, body, latest=False, signal_after=None, sig=signal.SIGUSR1):
    runs = plan_runs('cityscapes', None, out_root=str(tmp_path / 'runs'))
    if latest:                                       # a stopped run: its configuration and a checkpoint (never read here)
        Path(runs[0]['out']).mkdir(parents=True); (Path(runs[0]['out']) / 'latest.pth').write_bytes(b'x')
        save_config(resolve(runs[0]['argv']), Path(runs[0]['out']) / 'config.yaml')
    script = tmp_path / 'job.sh'; script.write_text(slurm_script(runs, SlurmJob(gpus=2, log_dir=str(tmp_path / "slurm"))))
    _fake_bin(tmp_path / 'bin', body)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{BIN}:{os.environ['PATH']}", FAKE_LOG=str(tmp_path), SLURM_JOB_ID='77',
               SLURM_ARRAY_TASK_ID='0', SLURM_JOB_NODELIST='node1', PYTHONPATH=str(REPO))   # the real ael-launch, a fake torchrun
    p = subprocess.Popen(['bash', str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if signal_after:                                  # once the fake torchrun runs (ael-launch imports torch first)
        t0 = time.time()
        while not (tmp_path / 'args').exists() and time.time() - t0 < 120: time.sleep(0.1)
        time.sleep(signal_after); p.send_signal(sig)
    out, _ = p.communicate(timeout=60)
    requeued = (tmp_path / 'scontrol').read_text() if (tmp_path / 'scontrol').exists() else ''
    return p.returncode, out, requeued, (tmp_path / 'args').read_text()


def test_slurm_requeues_on_exit_75(tmp_path):
    rc, out, requeued, args = _run_script(tmp_path, f'exit {EXIT_REQUEUE}')
    assert rc == 0 and requeued.strip() == 'requeue 77', out
    assert '--no-python ael-train --preset cityscapes' in args and '--resume' not in args


def test_slurm_resumes_when_latest_exists(tmp_path):
    rc, out, requeued, args = _run_script(tmp_path, 'exit 0', latest=True)
    assert rc == 0 and requeued == '' and args.rstrip().endswith('--resume'), (out, args)


def test_slurm_no_requeue_on_plain_failure(tmp_path):
    rc, out, requeued, _ = _run_script(tmp_path, 'exit 1')
    assert rc == 1 and requeued == '', out


def test_slurm_signal_is_forwarded_and_requeues(tmp_path):
    # USR1 before any rank started: ael-launch ends torchrun (which ignores it) at once; the script still requeues
    rc, out, requeued, args = _run_script(tmp_path, 'sleep 30; echo ran-to-the-end >> "$FAKE_LOG/args"', signal_after=1.5)
    assert 'ran-to-the-end' not in args, out
    assert rc == 0 and requeued.strip() == 'requeue 77', out


def test_slurm_sigterm_stops_without_requeue(tmp_path):
    "SIGTERM (scancel) to the batch shell: forwarded, the run stops, the script says so in one line and does not requeue."
    rc, out, requeued, args = _run_script(tmp_path, 'sleep 30; echo ran-to-the-end >> "$FAKE_LOG/args"', signal_after=1.5,
                                          sig=signal.SIGTERM)
    assert 'ran-to-the-end' not in args and requeued == '', out
    assert out.rstrip().splitlines()[-1].startswith('ael-launch: stopped by SIGTERM') and 'Traceback' not in out, out


@pytest.mark.slow
def test_real_two_process_gloo_run(tmp_path, monkeypatch, capfd):
    "The printed torchrun command, run by ael-launch: 2 CPU processes (gloo) on tiny synthetic data."
    monkeypatch.chdir(REPO)
    monkeypatch.setenv('OMP_NUM_THREADS', '1')
    monkeypatch.setenv('PATH', f"{BIN}:{os.environ['PATH']}")   # torchrun and ael-train of this environment
    out = tmp_path / 'cpu' / 'drawn_seed0'
    expected = shlex.join(torchrun_argv(plan_runs('cpu', None, out_root=str(tmp_path), overrides=TINY)[0]['argv'], 2))
    assert ael_launch(['--preset', 'cpu', '--gpus', '2', '--out-root', str(tmp_path)] + TINY) == 0
    printed = capfd.readouterr().out
    assert printed.splitlines()[0] == expected                     # printed before it ran, and what ran
    assert printed.count('best     mIoU') == 1 and 'stopped at step' not in printed   # rank 0 alone reports, after the group is gone
    recs = [json.loads(l) for l in (out / 'metrics.jsonl').read_text().splitlines()]
    assert [r['it'] for r in recs if 'eval' not in r] == [1, 2]
    assert json.loads((out / 'summary.json').read_text())['it'] == 2
    assert (out / 'per_class.md').is_file() and (out / 'latest.pth').is_file()
    assert '--resume' in plan_runs('cpu', None, out_root=str(tmp_path), overrides=TINY)[0]['argv']   # a second launch resumes

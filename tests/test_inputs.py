"""Trust every byte (issue 23): damaged checkpoints are refused on every read and the previous one is named; --resume keeps
the run's settings; every console script checks its options before it runs, with one line naming the option."""
import json, os, subprocess, sys, zipfile
from pathlib import Path
import pytest
import torch
from ael_nb.core import DataError
from ael_nb.config import get_config
from ael_nb.plan import TINY
from ael_nb.runlog import read_metrics
from ael_nb.state import PREVIOUS, read_checkpoint
from ael_nb.train import setup, train

BIN = Path(sys.executable).parent
ENV = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=str(Path(__file__).resolve().parents[1]))
TINY = [o for o in TINY if not o.startswith('method.')]           # a supervised run refuses method.* keys it would ignore
SUP = ['method.name=supervised']


def run(script, *args):
    return subprocess.run([str(BIN / script)] + [str(a) for a in args], capture_output=True, text=True, env=ENV, timeout=300)

def one_line(r, code=2):
    "Exit `code` and a single stderr line without a traceback."
    assert r.returncode == code and r.stderr.count('\n') == 1 and 'Traceback' not in r.stderr, (r.returncode, r.stderr)
    return r.stderr

def flip_bytes(path: Path, n: int = 64):
    "Flip `n` bytes in the middle of the largest tensor stored in a torch checkpoint (a zip): readable, wrong numbers."
    with zipfile.ZipFile(path) as z: info = max((i for i in z.infolist() if '/data/' in i.filename), key=lambda i: i.file_size)
    raw = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)    # local header, then the stored bytes
    mid = start + info.file_size // 2
    raw[mid:mid + n] = bytes(b ^ 0xFF for b in raw[mid:mid + n])
    path.write_bytes(bytes(raw))


@pytest.fixture(scope='module')
def stopped(tmp_path_factory):
    "A supervised run stopped at step 2 of 4 (latest.pth at steps 1 and 2: previous.pth holds step 1), with optim.lr=0.02."
    out = tmp_path_factory.mktemp('trust') / 'run'
    r = run('ael-train', '--out', out, *TINY, *SUP, 'optim.iters=4', 'run.stop_at=2', 'run.checkpoint_interval=1', 'optim.lr=0.02')
    assert r.returncode == 0, r.stderr
    return out


# 1. a checkpoint proves its content
@pytest.mark.slow
def test_flipped_bytes_are_refused_everywhere_and_previous_is_named(stopped, tmp_path):
    import shutil
    out = tmp_path / 'run'; shutil.copytree(stopped, out)
    assert read_checkpoint(out / 'latest.pth')['it'] == 2 and read_checkpoint(out / PREVIOUS)['it'] == 1
    flip_bytes(out / 'latest.pth')
    err = one_line(run('ael-train', '--out', out, '--resume'))
    assert f"{out / 'latest.pth'}: damaged: its content does not match the digest" in err
    assert f"the previous checkpoint {out / PREVIOUS} (step 1) is intact: resume from it with  mv {out / PREVIOUS} {out / 'latest.pth'}" in err
    assert 'damaged' in one_line(run('ael-eval', out / 'latest.pth', '--max-images', 1))
    from ael_nb.datasets import make_fixture
    imgs = make_fixture('folder', tmp_path / 'imgs', n=2, size=(20, 28)) / 'a'
    assert 'damaged' in one_line(run('ael-predict', out / 'latest.pth', imgs, tmp_path / 'masks'))
    with pytest.raises(DataError, match='damaged'):                                   # fine-tuning from it
        setup(get_config('cpu', overrides=TINY + SUP + [f'run.out={tmp_path / "ft"}']), init=out / 'latest.pth')
    from ael_nb.model import read_state_dict
    with pytest.raises(DataError, match='damaged'): read_state_dict(out / 'latest.pth', trusted=True)   # model.pretrained=PATH
    os.replace(out / PREVIOUS, out / 'latest.pth')                                    # what the message says to do
    r = run('ael-train', '--out', out, '--resume')
    assert r.returncode == 0, r.stderr
    assert json.loads((out / 'summary.json').read_text())['it'] == 4


def test_checkpoint_of_another_network_names_the_key(stopped, tmp_path):
    cfg = get_config('cpu', overrides=TINY + SUP + [f'run.out={tmp_path}', 'model.backbone=resnet34'])
    with pytest.raises(DataError, match="holds another network: model.backbone='resnet18' in the checkpoint, 'resnet34' here"):
        setup(cfg, init=stopped / 'latest.pth')
    assert not (tmp_path / '.lock').exists()


# 2. --resume keeps the run's settings
@pytest.mark.slow
def test_resume_reads_the_runs_config(stopped, tmp_path):
    import shutil
    out = tmp_path / 'run'; shutil.copytree(stopped, out)
    err = one_line(run('ael-train', '--out', out, '--resume', 'optim.lr=0.01'))
    assert 'optim.lr: 0.02 -> 0.01' in err and '--allow-changes' in err
    assert "--preset voc: the run in" in one_line(run('ael-train', '--out', out, '--resume', '--preset', 'voc'))
    r = run('ael-train', '--out', out, '--resume', 'run.stop_at=3')                  # where it stops is free to change
    assert r.returncode == 0, r.stderr
    assert read_checkpoint(out / 'latest.pth')['config']['optim']['lr'] == 0.02
    assert [r['lr'] for r in read_metrics(out) if 'lr' in r][0] == pytest.approx(0.02)
    r = run('ael-train', '--out', out, '--resume', '--allow-changes', 'optim.lr=0.01')
    assert r.returncode == 0 and 'optim.lr: 0.02 -> 0.01' in r.stdout, r.stderr
    assert [r['config_changes'] for r in read_metrics(out) if 'config_changes' in r] == [['optim.lr: 0.02 -> 0.01']]
    assert 'optim.lr: 0.01 -> 0.02' in one_line(run('ael-train', '--out', out, '--resume', 'optim.lr=0.02'))   # accepting is not inherited
    err = one_line(run('ael-train', '--out', tmp_path / 'none', '--resume'))
    assert f"{tmp_path / 'none' / 'config.yaml'}: cannot resume" in err


def test_a_key_set_twice_in_yaml_is_refused(stopped, tmp_path):
    "A --config or a run's config.yaml that sets a key twice (YAML keeps the last silently): one line naming the file, the key and both lines."
    import shutil
    from ael_nb.compare import read_result
    (tmp_path / 'twice.yaml').write_text('optim:\n  lr: 0.1\n  iters: 4\n  lr: 0.2\n')
    err = one_line(run('ael-train', '--config', tmp_path / 'twice.yaml', '--out', tmp_path / 'new', *TINY, *SUP))
    assert f"{tmp_path / 'twice.yaml'}: optim.lr is set twice, at lines 2 and 4: keep one" in err
    assert not (tmp_path / 'new').exists()                                           # refused before anything is written
    out = tmp_path / 'run'; shutil.copytree(stopped, out)
    n = len((out / 'config.yaml').read_text().splitlines())
    with open(out / 'config.yaml', 'a') as f: f.write('optim:\n  lr: 0.5\n')            # a second optim section, by hand
    err = one_line(run('ael-train', '--out', out, '--resume'))
    assert f"{out / 'config.yaml'}: optim is set twice, at lines " in err and f" and {n + 1}: keep one" in err
    with pytest.raises(DataError, match='optim is set twice'): read_result(out)       # nor does a comparison read it


# 3. one line for a second Ctrl-C during the save: the child's first checkpoint (step 1) is written whole, then it sends
# itself a Ctrl-C; the stop checkpoint of step 2 is written through a file whose third write, inside torch's zip writer,
# sends the second Ctrl-C
CHILD = r'''
import os, signal, sys, torch
real, saves = torch.save, []
class SecondCtrlC:
    def __init__(self, f): self.f, self.writes = f, 0
    def write(self, b):
        self.writes += 1
        if self.writes == 3: os.kill(os.getpid(), signal.SIGINT)
        return self.f.write(b)
    def flush(self): self.f.flush()
def save(obj, f, *a, **k):
    if not (isinstance(obj, dict) and 'student' in obj): return real(obj, f, *a, **k)
    saves.append(obj['it'])
    if len(saves) > 1: return real(obj, SecondCtrlC(f), *a, **k)
    real(obj, f, *a, **k); os.kill(os.getpid(), signal.SIGINT)
torch.save = save
from ael_nb.cli import ael_train
sys.exit(ael_train(sys.argv[1:]))
'''

def test_second_ctrl_c_inside_the_save_is_one_line_and_the_checkpoint_whole(tmp_path):
    (tmp_path / 'child.py').write_text(CHILD)
    out = tmp_path / 'run'
    r = subprocess.run([sys.executable, str(tmp_path / 'child.py'), '--out', str(out), *TINY, *SUP, 'optim.iters=3',
                        'run.checkpoint_interval=1'], env=ENV, capture_output=True, text=True, timeout=300)
    assert (r.returncode, r.stderr.strip().splitlines()) == (130, ['ael-train: interrupted (a second Ctrl-C); a checkpoint '
                                                                   'being written was finished first']), r.stderr
    assert read_checkpoint(out / 'latest.pth')['it'] == 2                   # the save the Ctrl-C fell into, complete
    assert read_checkpoint(out / PREVIOUS)['it'] == 1                       # and the version it replaced
    assert not list(out.glob('.*.tmp')) and not (out / '.lock').exists()


# 4. every option checked before anything runs, one line naming it
@pytest.mark.parametrize('args,message', [
    (['preset=voc'], "override 'preset=voc': the preset is chosen with --preset voc"),
    (['data.crop_size=[48]'], 'data.crop_size: expected 2 values (or one number for all), got [48]'),
    (['--method', 'supervised', 'method.gamma=3'], 'method.gamma (supervised training has no unsupervised part)'),
    (['method.acp=false', 'method.k=2'], 'method.k (used only with method.acp=true)'),
    (['--allow-changes'], '--allow-changes (run.allow_changes, used only with run.resume=true'),
    (['eval.mode=whole', 'eval.window=600'], 'eval.window (used only with eval.mode=sliding)'),
])
def test_train_refuses_values_it_would_ignore(args, message):
    assert message in one_line(run('ael-train', *args, '--show-config'))


def test_out_that_is_a_file(tmp_path):
    (tmp_path / 'f').write_text('x')
    assert f"{tmp_path / 'f'}: is a file; run.out (--out) takes a folder" in one_line(run('ael-train', '--out', tmp_path / 'f', *TINY))


@pytest.mark.slow
def test_eval_and_predict_refuse_what_train_refuses(stopped, tmp_path):
    ck = stopped / 'latest.pth'
    err = one_line(run('ael-eval', ck, '--mode', 'sliding', '--window', 16, 16, '--stride', 24, 24))
    assert '--stride 24 24 exceeds --window 16 16' in err
    assert '--window is used only with --mode sliding' in one_line(run('ael-eval', ck, '--mode', 'whole', '--window', 16, 16))
    assert '--crop is used only with --mode center' in one_line(run('ael-eval', ck, '--crop', 16, 16))
    from ael_nb.datasets import make_fixture
    imgs = make_fixture('folder', tmp_path / 'imgs', n=2, size=(20, 28)) / 'a'
    assert '--stride 24 24 exceeds --window 16 16' in one_line(run('ael-predict', ck, imgs, tmp_path / 'm', '--mode', 'sliding',
                                                                    '--window', 16, 16, '--stride', 24, 24))
    assert '--window is used only with --mode sliding' in one_line(run('ael-predict', ck, imgs, tmp_path / 'm', '--window', 16, 16))
    (tmp_path / 'file').write_text('x')
    assert f"{tmp_path / 'file'}: is a file; the output takes a folder" in one_line(run('ael-predict', ck, imgs, tmp_path / 'file'))
    assert not (tmp_path / 'm').exists()


@pytest.mark.parametrize('args,message', [
    (['--folds', '3-1'], "argument --folds: '3-1': the range 3-1 is empty"), (['--seeds', '3-1'], "argument --seeds: '3-1': the range"),
    (['--folds', 'abc'], "argument --folds: 'abc' is not a list of integers"), (['--seeds', 'abc'], "argument --seeds: 'abc' is not"),
    (['--slurm', 'x.sh', '--time', 'abc'], "argument --time: 'abc' is not a SLURM time"),
    (['--slurm', 'x.sh', '--signal-secs', '-5'], "argument --signal-secs: '-5' must be >= 1"),
    (['--time', '12:00:00'], '--time: used only with --slurm'), (['--gpus', '0'], "argument --gpus: '0' must be >= 1"),
    (['--node-rank', '1'], '--node-rank: used only with --nnodes > 1'),
])
def test_launch_options(args, message):
    assert message in one_line(run('ael-launch', *args, '--dry-run'))


def test_launch_slurm_targets(tmp_path):
    assert 'is a folder; --slurm takes a file name' in one_line(run('ael-launch', '--slurm', tmp_path))
    err = one_line(run('ael-launch', '--slurm', '/proc/ael_job.sh'))      # no user, root included, may create files there
    assert err.startswith('ael-launch: error: /proc') and ('not writable' in err or 'cannot be written' in err), err


def test_splits_options(tmp_path):
    for args, msg in [(['--folds', '3-1'], "argument --folds: '3-1': the range"), (['--count', '0'], "argument --count: '0' must be >= 1"),
                      (['--fraction', '2'], "argument --fraction: '2': fraction 2 outside (0, 1]")]:
        assert msg in one_line(run('ael-splits', 'make', 'camvid', '--root', tmp_path, *(args if '--folds' not in args else args + ['--count', '3'])))


# 5. a preset's class ids are checked against the dataset while the run resolves, before anything is written
def test_preset_class_ids_outside_the_dataset_leave_the_folder_unused(tmp_path):
    out = tmp_path / 'run'
    over = TINY + ['data.dataset=synthetic', 'data.batch_size=4', 'model.backbone=resnet18', 'model.pretrained=none',
                   'model.output_stride=16', 'eval.mode=whole', f'run.out={out}']
    with pytest.raises(ValueError, match=r"method.cp_exclude=\[0, 1, 2, 8, 10\] \(the value of preset 'cityscapes-authors'\) "
                                         r"names outside 0..9 of dataset 'synthetic'"):
        setup(get_config('cityscapes-authors', overrides=over))
    assert not out.exists() or not list(out.iterdir())                 # no config.yaml, no lock: nothing to refuse
    with setup(get_config('cityscapes-authors', overrides=over + ['method.cp_exclude='])) as r:   # the corrected rerun
        assert r.cfg.method.cp_exclude == () and (out / 'config.yaml').is_file()

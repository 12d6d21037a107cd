"Console scripts: help, ael-train end to end, ael-eval and ael-predict on its checkpoint, error messages."
import json, os, shutil, subprocess, sys
from pathlib import Path
import pytest

BIN = Path(sys.executable).parent
ENV = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1')
TINY = ['data.synthetic_size=40,48', 'data.synthetic_n=12', 'data.crop_size=32', 'data.batch_size=2', 'optim.iters=2',
        'eval.max_images=2', 'run.progress=false', 'run.tensorboard=false', 'data.check=false', 'run.threads=1']

def run(script, *args, cwd=None):
    exe = BIN / script
    cmd = [str(exe)] if exe.exists() else [sys.executable, '-c', f'import sys; from ael_nb.cli import {script.replace("-", "_")} as f; sys.exit(f())']
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=300)


@pytest.mark.parametrize('script', ['ael-train', 'ael-eval', 'ael-predict'])
def test_help(script):
    r = run(script, '--help')
    assert r.returncode == 0 and r.stdout.startswith(f'usage: {script}')


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp('cli') / 'run'
    r = run('ael-train', '--out', out, '--seed', 1, *TINY)
    assert r.returncode == 0, r.stderr
    return out, r.stdout


def test_train_end_to_end(trained):
    out, stdout = trained
    assert '| class | teacher | student | group |' in stdout and '| tail |' in stdout and '| head |' in stdout
    assert 'teacher  mIoU' in stdout and 'best     mIoU' in stdout
    s = json.loads((out / 'summary.json').read_text())
    assert s['method'] == 'ael' and s['it'] == 2
    assert 'seed: 1' in (out / 'config.yaml').read_text()


def test_eval_checkpoint(trained, tmp_path):
    out, _ = trained
    r = run('ael-eval', out / 'latest.pth', '--protocol', 'sliding', '--window', 24, 24, '--stride', 16, 16,
            '--max-images', 2, '--save-dir', tmp_path / 'pred', '--json', tmp_path / 'e.json')
    assert r.returncode == 0, r.stderr
    assert 'sliding evaluation' in r.stdout and 'mIoU' in r.stdout and '| class | teacher | group |' in r.stdout
    assert len(list((tmp_path / 'pred').glob('*.png'))) == 2
    assert json.loads((tmp_path / 'e.json').read_text())['model'] == 'teacher'
    r = run('ael-eval', out / 'latest.pth', '--model', 'student', '--max-images', 1)
    assert r.returncode == 0 and '| class | student | group |' in r.stdout


def test_predict_folder(trained, tmp_path):
    from ael_nb.datasets import make_fixture
    folder = make_fixture('folder', tmp_path / 'imgs', n=4, size=(20, 28)) / 'a'
    r = run('ael-predict', trained[0] / 'best.pth', folder, tmp_path / 'masks', '--overlay')
    assert r.returncode == 0, r.stderr
    from PIL import Image
    masks = sorted((tmp_path / 'masks').glob('*.png'))
    assert len(masks) == 2 and Image.open(masks[0]).size == (28, 20)


def test_errors(trained, tmp_path):
    r = run('ael-eval', tmp_path / 'missing.pth')
    assert r.returncode == 2 and 'missing.pth: checkpoint not found' in r.stderr
    (tmp_path / 'bad.pth').write_bytes(b'garbage')
    r = run('ael-predict', tmp_path / 'bad.pth', tmp_path, tmp_path / 'o')
    assert r.returncode == 2 and 'bad.pth: not a readable checkpoint' in r.stderr
    r = run('ael-predict', trained[0] / 'latest.pth', tmp_path / 'nowhere', tmp_path / 'o')
    assert r.returncode == 2 and 'image folder not found' in r.stderr
    (tmp_path / 'm.json').write_text('{"dataset": "synthetic"')
    r = run('ael-train', '--manifest', tmp_path / 'm.json', '--out', tmp_path / 'r', *TINY)
    assert r.returncode == 2 and 'm.json' in r.stderr and not (tmp_path / 'r' / 'latest.pth').exists()
    r = run('ael-train', 'method.gama=2')
    assert r.returncode == 2 and 'Did you mean method.gamma' in r.stderr
    from ael_nb.datasets import make_fixture
    import torch
    n = torch.load(trained[0] / 'latest.pth', weights_only=False)['num_classes']
    other, split = ('cityscapes', 'val') if n != 19 else ('ade20k', 'validation')     # a dataset with another class count
    root = make_fixture(other, tmp_path / other, n=2, size=(16, 24))
    r = run('ael-eval', trained[0] / 'latest.pth', '--dataset', other, '--data-root', root, '--split', split)
    assert r.returncode == 2 and f'dataset {other!r} has' in r.stderr and 'classes' in r.stderr

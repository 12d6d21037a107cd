"Console scripts: help, ael-train end to end, ael-eval and ael-predict on its checkpoint, error messages."
import json, os, shutil, subprocess, sys
from pathlib import Path
import pytest

BIN = Path(sys.executable).parent
ENV = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1')
from ael_nb.plan import TINY

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
    r = run('ael-eval', out / 'latest.pth', '--mode', 'sliding', '--window', 24, 24, '--stride', 16, 16,
            '--max-images', 2, '--save-dir', tmp_path / 'pred', '--json', tmp_path / 'e.json')
    assert r.returncode == 0, r.stderr
    assert 'sliding evaluation on' in r.stdout and "protocol kit: the kit's own" in r.stdout and 'mIoU' in r.stdout and '| class | teacher | group |' in r.stdout
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
    overlays = sorted((tmp_path / 'masks' / 'overlays').glob('*.png'))
    assert [o.name for o in overlays] == [m.name for m in masks] and Image.open(overlays[0]).size == (28, 20)


@pytest.mark.slow
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


# ---------------------------------------------------------------- bad input: one line naming the key or file, exit 2
def inproc(capsys, fn, *args):
    "A console script's entry point in this process (fast): (exit status, stdout, stderr)."
    try: rc = fn([str(a) for a in args])
    except SystemExit as e: rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_overrides_anywhere():
    r = run('ael-train', 'optim.iters=3', '--seed', 1, 'run.threads=1', '--show-config')
    assert r.returncode == 0, r.stderr
    assert 'iters: 3' in r.stdout and 'seed: 1' in r.stdout and 'threads: 1' in r.stdout


BAD_VALUES = [('optim.iters=-3', 'optim.iters=-3 must be an integer >= 1'), ('optim.iters=0', 'optim.iters=0 must be'),
              ('method.ema_decay=2', 'method.ema_decay=2.0 must be a finite number in [0, 1]'),
              ('eval.interval=-1', 'eval.interval=-1 must be an integer >= 0'),
              ('eval.max_images=0', 'eval.max_images=0 must be null or an integer >= 1'),
              ('data.batch_size=0', 'data.batch_size=0 must be'), ('data.crop_size=0,0', 'data.crop_size=(0, 0) must be'),
              ('run.device=tpu', "run.device='tpu' must be"), ('optim.lr=1e400', "optim.lr: '1e400' is not a finite number"),
              ('optim.lr=-0.1', 'optim.lr=-0.1 must be a finite number > 0'), ('method.tau=1', 'method.tau=1.0 must be'),
              ('method.cp_prob=1.5', 'method.cp_prob=1.5 must be'), ('data.fraction=0', 'data.fraction=0.0 must be'),
              ('model.output_stride=32', 'model.output_stride=32 must be one of [8, 16]'),
              ('eval.models=[]', "eval.models=() must be 'teacher', 'student' or both"), ('optim.iters', 'is not of the form key=value')]


@pytest.mark.parametrize('override,message', BAD_VALUES)
def test_bad_values_one_line(capsys, override, message):
    from ael_nb.cli import ael_train
    rc, out, err = inproc(capsys, ael_train, override, '--show-config')
    assert rc == 2 and err.startswith('ael-train: error: ') and message in err and err.count('\n') == 1, err
    assert 'Traceback' not in err and out == ''


def test_bad_files_and_devices_one_line(capsys, tmp_path):
    from ael_nb.cli import ael_train, ael_eval
    (tmp_path / 'bad.yaml').write_text('optim:\n  iters: [3\n')
    rc, _, err = inproc(capsys, ael_train, '--config', tmp_path / 'bad.yaml')
    assert rc == 2 and f"{tmp_path / 'bad.yaml'}: not valid YAML" in err and err.count('\n') == 1, err
    (tmp_path / 'key.yaml').write_text('optim:\n  iter: 3\n')
    rc, _, err = inproc(capsys, ael_train, '--config', tmp_path / 'key.yaml')
    assert rc == 2 and 'key.yaml: unknown configuration key' in err and 'optim.iters' in err
    import torch
    if not torch.cuda.is_available():
        rc, _, err = inproc(capsys, ael_train, 'run.device=cuda:0', *TINY)
        assert rc == 2 and "run.device 'cuda:0': no such CUDA device" in err, err
    rc, _, err = inproc(capsys, ael_eval, tmp_path / 'x.pth', '--device', 'tpu')
    assert rc == 2 and "--device 'tpu': expected" in err
    rc, _, err = inproc(capsys, ael_eval, tmp_path / 'x.pth', '--max-images', 0)
    assert rc == 2 and "argument --max-images: '0' must be >= 1" in err


def test_debug_shows_the_traceback():
    r = run('ael-train', 'optim.iters=0', '--debug')
    assert r.returncode == 1 and 'Traceback' in r.stderr and 'optim.iters=0 must be' in r.stderr


@pytest.mark.parametrize('split', ['train', 'val'])
def test_empty_split_folder(capsys, tmp_path, split):
    "An empty train/ or val/ folder stops ael-train with the folder's name (it gave mIoU nan and 'best -100.0')."
    from ael_nb.cli import ael_train
    from ael_nb.datasets import make_fixture
    root = make_fixture('camvid', tmp_path / 'camvid', n=4)
    (root / f'{split}.txt').unlink(); shutil.rmtree(root / split); (root / split).mkdir()
    real = [o for o in TINY if not o.startswith('data.synthetic')]    # keys a CamVid run would ignore are refused
    rc, _, err = inproc(capsys, ael_train, 'data.dataset=camvid', '--data-root', root, '--out', tmp_path / 'run', *real)
    assert rc == 2 and f"{root / split}: split '{split}' holds no images" in err and err.count('\n') == 1, err


@pytest.mark.slow
def test_predict_refuses_two_inputs_for_one_mask(trained, tmp_path):
    from PIL import Image
    imgs = tmp_path / 'imgs'; imgs.mkdir()
    for name in ('x.png', 'x.jpg', 'y.png'): Image.new('RGB', (28, 20), (90, 120, 60)).save(imgs / name)
    r = run('ael-predict', trained[0] / 'best.pth', imgs, tmp_path / 'masks')
    assert r.returncode == 2 and 'x.jpg and x.png would both be written to x.png' in r.stderr, r.stderr
    assert not (tmp_path / 'masks').exists()                          # nothing written
    (imgs / 'x.jpg').unlink(); (imgs / 'z.png').write_bytes(b'not an image'); (imgs / 'w.jpg').write_bytes(b'')
    r = run('ael-predict', trained[0] / 'best.pth', imgs, tmp_path / 'masks')
    assert r.returncode == 2 and '2 of 4 images cannot be read, no mask written: w.jpg' in r.stderr and 'z.png' in r.stderr
    assert not (tmp_path / 'masks').exists() and r.stderr.count('\n') == 1
    (imgs / 'z.png').unlink(); (imgs / 'w.jpg').unlink()
    r = run('ael-predict', trained[0] / 'best.pth', imgs, tmp_path / 'masks')
    assert r.returncode == 0 and r.stdout.strip() == f"2 masks written to {tmp_path / 'masks'}"
    assert sorted(p.name for p in (tmp_path / 'masks').iterdir()) == ['x.png', 'y.png']
    r = run('ael-predict', trained[0] / 'best.pth', imgs, imgs)
    assert r.returncode == 2 and 'the output folder is the image folder' in r.stderr


def test_eval_save_dir_count(trained, tmp_path):
    r = run('ael-eval', trained[0] / 'latest.pth', '--max-images', 3, '--save-dir', tmp_path / 'pred', '--json', tmp_path / 'deep' / 'e.json')
    assert r.returncode == 0, r.stderr
    assert f"3 prediction maps written to {tmp_path / 'pred'}" in r.stdout and len(list((tmp_path / 'pred').glob('*.png'))) == 3
    assert (tmp_path / 'deep' / 'e.json').is_file()                   # the JSON's folder is created


def test_diverged_run_exits_nonzero_with_one_line(tmp_path):
    r = run('ael-train', '--out', tmp_path / 'r', *TINY, 'optim.lr=1e6', 'optim.iters=4')
    assert r.returncode == 1, r.stdout + r.stderr
    assert 'non-finite loss' in r.stderr and 'Traceback' not in r.stderr
    assert not (tmp_path / 'r' / 'summary.json').exists()


def test_train_says_how_long_it_will_take(capsys, tmp_path):
    "After its first steps `ael-train` prints, once, the time a step takes here and about how long the rest takes (format only: no timing asserted)."
    import re
    from ael_nb.cli import ael_train
    from ael_nb.train import ESTIMATE_AFTER
    iters = ESTIMATE_AFTER + 4
    rc, out, err = inproc(capsys, ael_train, '--out', tmp_path / 'run', *TINY, f'optim.iters={iters}', 'run.progress=true')
    assert rc == 0, err
    lines = [l for l in out.splitlines() if 'a step here' in l]
    assert len(lines) == 1, out
    assert re.fullmatch(rf"\d+\.\d\d s a step here: (about \d+ minutes?|about [\d.]+ hours|about an hour|under a minute) for the {iters - ESTIMATE_AFTER - 1} steps left "
                        r"on this machine, plus 1 evaluation", lines[0]), lines[0]
    assert out.index('fp32 (optim.amp=none)') < out.index(lines[0])   # after the first line, which names the precision


@pytest.mark.slow
def test_predict_and_eval_cap_the_size(trained, tmp_path):
    "An odd-sized image over --max-size is predicted scaled down; its mask and overlay keep the image's own size."
    import numpy as np
    from PIL import Image
    (tmp_path / 'imgs').mkdir()
    pixels = np.random.default_rng(0).integers(0, 256, (131, 97, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / 'imgs' / 'odd.png')
    for cap in ('40', '0'):                                   # 0: the full size
        r = run('ael-predict', trained[0] / 'best.pth', tmp_path / 'imgs', tmp_path / f'm{cap}', '--max-size', cap, '--overlay')
        assert r.returncode == 0, r.stderr
        assert Image.open(tmp_path / f'm{cap}' / 'odd.png').size == (97, 131)
        assert Image.open(tmp_path / f'm{cap}' / 'overlays' / 'odd.png').size == (97, 131)
    pixels = {}                                               # the labels are counted at their own size either way
    for cap in (16, 0):
        r = run('ael-eval', trained[0] / 'latest.pth', '--max-size', cap, '--max-images', 2)
        assert r.returncode == 0, r.stderr
        assert 'whole evaluation on' in r.stdout and ('pixels, longest side at most 16, ' in r.stdout) == (cap == 16), r.stdout
        pixels[cap] = r.stdout.split(' pixels,')[0].rsplit(' ', 1)[1]
    assert pixels[16] == pixels[0], pixels


def test_thread_count_is_a_new_draw(tmp_path):
    "A run repeats to the digit given (instruction path, thread count, torch version), which `summary.json` records; "
    "the same tiny run at 1 and 2 threads ends with other weights (README and GUIDE say so)."
    import torch
    from ael_nb.config import get_config
    from ael_nb.train import train
    before = torch.get_num_threads()
    try: s1, s2, s1b = (train(get_config('cpu', overrides=TINY + [f'run.threads={n}', f'run.out={tmp_path / str(i)}']))
                        for i, n in enumerate((1, 2, 1)))
    finally: torch.set_num_threads(before)
    assert (s1['threads'], s2['threads'], s1['torch']) == (1, 2, torch.__version__) and s1['path'] == s2['path']
    assert s1['weights'] == s1b['weights'] and s1['weights'] != s2['weights']


def test_summary_without_draws_on_its_path(trained, tmp_path):
    "`ael-train` ends by placing the run among the stored draws of its own path; a path with none is said to have none, and "
    "nothing is compared (a stored supervised cell of the same setting and seed on another path is not this run's twin)."
    from ael_nb.cli import config_from_args, parse, train_parser
    from ael_nb.draws import closing_summary, setting_of
    from ael_nb.config import read_yaml, to_dict
    out, stdout = trained
    s, cfg = json.loads((out / 'summary.json').read_text()), read_yaml(out / 'config.yaml')
    assert 'this run is one draw' in stdout and f"on {s['path']} at {s['threads']} thread" in stdout
    cfg['method']['name'] = 'supervised'
    cell = dict(grid='cheaper', seed=1, variant='supervised', it=2, manifest_hash=s['manifest_hash'], manifest=s['manifest'], metrics=s['last'], config=cfg,
                host=dict(path='other-path', threads=s['threads'], torch=s['torch']), time_s=1.0)
    (tmp_path / 'g').mkdir(); (tmp_path / 'g' / 'supervised__1-8__s1.json').write_text(json.dumps(cell))
    txt = closing_summary(out, tmp_path)
    assert f"no stored supervised draw of this setting on {s['path']} (stored paths: other-path)" in txt, txt
    assert 'vs supervised' not in txt and 'paired gain' not in txt and 'same seed' not in txt.split('twin here')[0], txt
    cmd = txt.splitlines()[-1].split()                                  # the twin's command trains the same setting here
    twin = config_from_args(parse(train_parser(), cmd[1:]))
    assert cmd[0] == 'ael-train' and twin.method.name == 'supervised' and twin.run.seed == 1
    assert setting_of(read_yaml(out / 'config.yaml')) == setting_of(to_dict(twin))


def test_folder_step_line_per_path_in_words():
    "The stored folder-step measurements (bench/results/folder_step_*.json, shipped in ael_nb/stored/): each path reads its own, the time in words."
    from ael_nb.cli import measured_time
    from ael_nb.config import get_config, resolved
    fc = resolved(get_config('folder', overrides=['run.device=cpu']), 'cpu')
    assert measured_time(fc, path='avx512-bf16').startswith(
        "the folder preset's step took 4.76 CPU s on AMD EPYC (avx512-bf16, one thread; folder_step_cpu_avx512bf16.json): "
        "its 2000 steps take about 2.6 hours on one such core, about 1.3 hours on two; this machine's own estimate follows")
    assert measured_time(fc, path='avx2-fp32').startswith(
        "the folder preset's step took 27 CPU s on AMD EPYC (avx2-fp32, one thread; folder_step_cpu_avx2.json): "
        "its 2000 steps take about 15 hours on one such core, about 7.5 hours on two")
    few = resolved(get_config('folder', overrides=['run.device=cpu', 'optim.iters=4']), 'cpu')   # the 'about 0 h'
    assert 'its 4 steps take about 2 minutes on one such core, about 1 minute on two' in measured_time(few, path='avx2-fp32')
    assert 'its 4 steps take under a minute on one such core, under a minute on two' in measured_time(few, path='avx512-bf16')


def test_the_pair_in_either_order(trained, tmp_path, capsys):
    "The twin command's run finishing beside the AEL run prints the pair (per-class table, both runs among the stored draws), "
    "and so does an AEL run finishing beside its supervised twin; a sibling of another seed or thread count is not paired, "
    "and the summary says in one line why the named folder is not the twin."
    import shlex, torch, yaml
    from ael_nb.cli import ael_train
    from ael_nb.draws import closing_summary, find_twin, twin_args
    quiet = ['run.progress=false', 'run.tensorboard=false', 'run.plots=false']
    shutil.copytree(trained[0], tmp_path / 'a' / 'run')
    ael, sup = tmp_path / 'a' / 'run', tmp_path / 'a' / 'run_supervised'
    assert shlex.join(['--out', f'{trained[0]}_supervised']) in trained[1]  # the folder the AEL run's twin command names
    threads = torch.get_num_threads()
    try:
        rc, out, err = inproc(capsys, ael_train, *twin_args(ael), *quiet)  # supervised second
        assert rc == 0, err
        s = json.loads((ael / 'summary.json').read_text())
        pair = f"ael vs supervised training, same setting, seed (1), path ({s['path']}) and thread count (1): per-class IoU (%)"
        for text in (out, closing_summary(ael)):
            assert pair in text and f'supervised: {sup}, trained here, not a stored result' in text, text
            assert 'its twin is one draw' in text and "this pair's gain, ael - supervised: tail " in text, text
            assert all(f'\n{c} ' in text for c in ('pole', 'bicycle', 'tail mIoU', 'mIoU')) and 'ael-train --preset' not in text, text
        shutil.copytree(sup, tmp_path / 'b' / 'run_supervised')           # supervised first, then AEL beside it
        rc, out, err = inproc(capsys, ael_train, '--out', tmp_path / 'b' / 'run', '--seed', 1, *TINY)
        assert rc == 0, err
        assert pair in out and f"supervised: {tmp_path / 'b' / 'run_supervised'}, trained here" in out, out
    finally: torch.set_num_threads(threads)
    stored_cfg = yaml.safe_load((sup / 'config.yaml').read_text()); stored_cfg['run']['seed'] = 2   # another draw (seed 1: the twin's own)
    cell = json.loads(json.dumps(dict(grid='g', dataset='synthetic', iters=2, seed=2, variant='supervised', it=2,
                                      manifest_hash=s['manifest_hash'], manifest=s['manifest'], metrics=s['last'],
                                      config=stored_cfg, time_s=1.0, host=dict(path=s['path'], threads=1, torch=s['torch']))))
    del cell['metrics']['teacher']; cell['metrics']['student']['tail_miou'] = .1; (tmp_path / 'res' / 'g').mkdir(parents=True)
    (tmp_path / 'res' / 'g' / 'supervised__1-8__s2.json').write_text(json.dumps(cell))
    text = closing_summary(ael, tmp_path / 'res')                         # both runs among the stored draws of their path
    assert f"stored draws of this setting on {s['path']}" in text and '  this run   1 thr' in text and '  its twin   1 thr' in text, text
    assert "this run's tail is above" in text and "its twin's tail is above" in text, text
    cfg = yaml.safe_load((sup / 'config.yaml').read_text()); cfg['run']['seed'] = 2
    (sup / 'config.yaml').write_text(yaml.safe_dump(cfg))                 # the named folder: another seed
    shutil.copytree(tmp_path / 'b' / 'run_supervised', tmp_path / 'a' / 'other')
    o = json.loads((tmp_path / 'a' / 'other' / 'summary.json').read_text()); o['threads'] = 2
    (tmp_path / 'a' / 'other' / 'summary.json').write_text(json.dumps(o))   # a sibling at another thread count
    why = f"{sup} is beside this run but is not its twin: seed 2, this run's 1"
    assert find_twin(ael) == (None, why)
    text = closing_summary(ael, tmp_path / 'res')
    assert why in text and 'its twin is one draw' not in text and f'--out {sup}2 ' in text.splitlines()[-1], text


def test_a_screened_candidate_is_no_draw_of_the_run(trained, tmp_path):
    "A stored AEL cell at the run's setting but with a method switch of its own (a screened candidate) is another "
    "method, and one with another labeled share (1-16 beside the run's) another setting: the closing summary counts "
    "neither among the run's draws; the same cell without either it does."
    import yaml
    from ael_nb.draws import draws_like
    run = trained[0]
    s, cfg = json.loads((run / 'summary.json').read_text()), yaml.safe_load((run / 'config.yaml').read_text())
    (tmp_path / 'g').mkdir()
    for name, spare, split in (('same', 0.0, s['manifest']), ('candidate', 0.5, s['manifest']), ('sixteenth', 0.0, '1-16_fold0')):
        c = json.loads(json.dumps(cfg)); c['method']['spare_unseen'] = spare
        cell = dict(grid='g', dataset='synthetic', iters=s['it'], seed=cfg['run']['seed'], variant=name, it=s['it'], key=name,
                    manifest_hash=s['manifest_hash'], manifest=split, metrics=s['last'], config=c, time_s=1.0,
                    host=dict(path=s['path'], threads=s['threads'], torch=s['torch']))
        (tmp_path / 'g' / f'{name}.json').write_text(json.dumps(cell))
    assert [Path(d['where']).name for d in draws_like(run, tmp_path)[1]] == ['same.json']


def test_a_supervised_run_counts_supervised_draws_whatever_their_method_keys(trained, tmp_path):
    "Supervised training reads no method.* key: a stored supervised cell with other method keys is still its draw."
    import yaml
    from ael_nb.draws import draws_like, twin_args
    from ael_nb.config import get_config
    run = trained[0]
    s, cfg = json.loads((run / 'summary.json').read_text()), yaml.safe_load((run / 'config.yaml').read_text())
    cfg['method']['name'] = 'supervised'
    sup = tmp_path / 'sup'; shutil.copytree(run, sup)
    (sup / 'config.yaml').write_text(yaml.safe_dump(cfg))
    (tmp_path / 'g').mkdir()
    c = json.loads(json.dumps(cfg)); c['method']['spare_unseen'] = 0.5; c['method']['tau'] = 0.5
    cell = dict(grid='g', dataset='synthetic', iters=s['it'], seed=cfg['run']['seed'], variant='s', it=s['it'], key='s',
                manifest_hash=s['manifest_hash'], manifest=s['manifest'], metrics=s['last'], config=c, time_s=1.0,
                host=dict(path=s['path'], threads=s['threads'], torch=s['torch']))
    (tmp_path / 'g' / 's.json').write_text(json.dumps(cell))
    assert [Path(d['where']).name for d in draws_like(sup, tmp_path)[1]] == ['s.json']


def test_the_twin_estimate_reads_pairs_timed_together(trained):
    "The twin's time is this run's step x the step-time ratio of stored pairs timed together (same folder, seed and "
    "threads); a supervised draw timed alone on a loaded machine (no AEL partner) does not enter it."
    from ael_nb.draws import paired_command
    run = trained[0]
    me = dict(method='ael', path='p', time_s=100.0, iters=100)
    d = lambda m, t, seed, where: dict(method=m, path='p', time_s=t, iters=10, seed=seed, threads=1, where=f'{where}/x.json')
    draws = [d('ael', 20.0, 0, 'a'), d('supervised', 10.0, 0, 'a'), d('ael', 30.0, 1, 'a'), d('supervised', 18.0, 1, 'a'),
             d('supervised', 500.0, 0, 'loaded')]
    txt = paired_command(run, me, draws)
    assert 'x 0.55, a supervised step over a ael step, the median of 2 stored pairs on p timed together' in txt, txt
    assert 'seed, path and threads), about 1 minute (' in txt, txt   # 100 s x 0.55
    assert "s a step: an upper bound" in paired_command(run, me, [d('supervised', 500.0, 0, 'loaded')])

"Your own data (`ael_nb.folder`): each malformed input of a folder is one line and trains nothing; check, splits, train, eval, predict end to end."
import json, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
from PIL import Image
from ael_nb.folder import ael_data, check_folder
from ael_nb.manifests import ael_splits, load_manifest
from ael_nb.cli import ael_train, ael_eval, ael_predict

COLOURS = [(128, 64, 128), (0, 0, 142), (220, 20, 60)]
TRAIN = ['run.threads=1', 'optim.amp=none', 'optim.iters=2', 'data.crop_size=24', 'data.batch_size=2', 'eval.max_images=2',
         'run.progress=false', 'run.tensorboard=false', 'run.plots=false', 'method.acm_targets=all']


def write_folder(root, n=6, labeled=4, size=(24, 32)):
    "images/town<k%2>/<k>.jpg, labels for the first `labeled` (road, a car box, a person strip: 0, 1, 2), val/ of 2 labeled images."
    root, rng, (h, w) = Path(root), np.random.default_rng(0), size
    root.mkdir(parents=True, exist_ok=True)
    (root / 'classes.yaml').write_text('classes:\n' + ''.join(f'  - {{name: c{k}, color: {list(c)}}}\n' for k, c in enumerate(COLOURS)))
    for pre, m, lab_n in (('', n, labeled), ('val/', 2, 2)):
        for k in range(m):
            i = f'town{k % 2}/{k:03d}'
            for d in ('images', 'labels'): (root / f'{pre}{d}' / i).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(root / f'{pre}images' / f'{i}.jpg')
            lab = np.zeros((h, w), np.uint8); lab[3:9, 4:12] = 1; lab[:, -2:] = 2; lab[-1] = 255
            if k < lab_n: Image.fromarray(lab).save(root / f'{pre}labels' / f'{i}.png')
    return root


def _wrong_values(r):
    Image.fromarray(np.full((24, 32), 7, np.uint8)).save(r / 'labels/town0/000.png'); return 'labels/town0/000.png', 'label values 7 (768 px) are not class ids (0..2)'
def _size(r):
    Image.fromarray(np.zeros((20, 32), np.uint8)).save(r / 'labels/town1/001.png'); return 'labels/town1/001.png', 'label size 32x20 differs from image size 32x24'
def _no_classes(r):
    (r / 'classes.yaml').unlink(); return 'classes.yaml', 'classes file is missing'
def _orphan(r):
    Image.fromarray(np.zeros((24, 32), np.uint8)).save(r / 'labels/town0/lost.png'); return 'labels/town0/lost.png', 'label without an image'
def _colour(r):
    rgb = np.array(COLOURS, np.uint8)[np.zeros((24, 32), int)]; rgb[0, :5] = (12, 200, 7)
    Image.fromarray(rgb).save(r / 'labels/town0/002.png'); return 'labels/town0/002.png', 'colours (12, 200, 7) (5 px) are no class colour of classes.yaml'
def _twice(r):                   # YAML would keep the second list silently
    with open(r / 'classes.yaml', 'a') as f: f.write('classes: [a, b, c]\n')
    return 'classes.yaml', 'classes is set twice, at lines 1 and 5'
def _empty(r):
    (r / 'images/town1/003.jpg').write_bytes(b''); return 'images/town1/003.jpg', 'empty file'

BAD = dict(wrong_values=_wrong_values, size_mismatch=_size, missing_classes_file=_no_classes, label_without_image=_orphan,
           rgb_unknown_colour=_colour, empty_image=_empty, key_set_twice=_twice)


@pytest.mark.parametrize('case', BAD)
def test_bad_input_one_line_trains_nothing(case, tmp_path, capsys):
    root = write_folder(tmp_path / 'data')
    file, problem = BAD[case](root)
    lines = check_folder(root)['problems']
    assert lines == [lines[0]] and lines[0].startswith(f'{root / file}: ') and problem in lines[0], lines
    assert ael_data(['check', str(root), '--histogram', str(tmp_path / 'h.png')]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == lines[0] and err[1].startswith('ael-data: 1 bad inputs')
    rc = ael_train(['--preset', 'folder', f'data.root={root}', '--out', str(tmp_path / 'run'), *TRAIN])
    assert rc == 2 and problem in capsys.readouterr().err
    assert not (tmp_path / 'run' / 'latest.pth').exists()


def test_end_to_end(tmp_path, capsys):
    root = write_folder(tmp_path / 'data')
    r = subprocess.run([sys.executable, '-c', 'import sys; from ael_nb.folder import ael_data; sys.exit(ael_data())', 'check', str(root),
                        '--histogram', str(tmp_path / 'hist.png')], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert 'tail classes c2: the 1 of 3 classes with the fewest labeled pixels' in r.stdout and (tmp_path / 'hist.png').stat().st_size > 0
    assert [l.split()[-1] for l in r.stdout.splitlines() if l.strip().startswith(('0 ', '1 ', '2 '))] == ['head', 'head', 'tail']

    man = tmp_path / 'manifests'                                       # a labeled fraction per fold, drawn twice: the same ids
    for _ in range(2): assert ael_splits(['make', 'folder', '--root', str(root), '--fraction', '1/2', '--folds', '0-1', '--out', str(man)]) == 0
    f0, f1 = load_manifest(man / 'folder/1-2_fold0.json'), load_manifest(man / 'folder/1-2_fold1.json')
    assert len(f0.labeled) == 2 and set(f0.labeled) <= {'town0/000', 'town1/001', 'town0/002', 'town1/003'} and f0.labeled != f1.labeled
    assert 'unchanged' in capsys.readouterr().out and f0.provenance['command'].startswith('ael-splits make folder')
    (tmp_path / 'mine.txt').write_text('images/town0/000.jpg\ntown1/001\n')   # the user's own list
    assert ael_splits(['import', 'lists', str(tmp_path / 'mine.txt'), '--dataset', 'folder', '--root', str(root), '--out', str(man)]) == 0
    own = load_manifest(man / 'folder/lists_mine.json')
    assert own.labeled == ['town0/000', 'town1/001'] and own.unlabeled == ['town0/002', 'town0/004', 'town1/003', 'town1/005']

    out = tmp_path / 'run'
    assert ael_train(['--preset', 'folder', f'data.root={root}', '--manifest', str(man / 'folder/lists_mine.json'), '--out', str(out), *TRAIN]) == 0
    o = capsys.readouterr().out
    assert f'folder {root}: tail classes c2' in o and '| c2 |' in o and '| tail |' in o
    assert json.loads((out / 'manifest.json').read_text()) | dict(hash=None) == dict(name='lists_mine', hash=None, labeled=2, unlabeled=4)
    assert ael_eval([str(out / 'latest.pth'), '--max-images', '2']) == 0 and 'whole evaluation on folder val' in capsys.readouterr().out
    assert ael_predict([str(out / 'best.pth'), str(root / 'val/images/town0'), str(tmp_path / 'masks'), '--overlay']) == 0
    mask = np.array(Image.open(tmp_path / 'masks/000.png'))
    assert mask.shape == (24, 32, 3) and {tuple(c) for c in mask.reshape(-1, 3)} <= set(COLOURS)
    assert Image.open(tmp_path / 'masks/overlays/000.png').size == (32, 24)
    assert ael_train(['--preset', 'folder', f'data.root={root}', '--out', str(tmp_path / 'tuned'), f'model.pretrained={out / "best.pth"}',
                      *TRAIN, 'optim.iters=1']) == 0                   # fine-tuning from that run's weights
    from ael_nb.compare import load_results, table4
    t = table4(load_results(out))
    assert list(t.columns[:3]) == ['c0', 'c1', 'c2'] and 'mean (tail)' in t.columns

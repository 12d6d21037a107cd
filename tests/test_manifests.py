"Manifests: deterministic draws, malformed files, verification, importers, the `ael-splits` CLI end to end, shipped files."
import hashlib, json, os, subprocess, sys
from pathlib import Path

import pytest

from ael_nb.core import DataError
from ael_nb.datasets import VOC, CamVid, Cityscapes, make_fixture
from ael_nb.manifests import (Manifest, ael_splits, draw_order, import_cps, import_u2pl, import_unimatch, load_manifest,
                              make_manifest, manifest_datasets, manifest_hash, save_manifest, verify_manifest)

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO/'data_manifests'
CAMVID_ROOT = os.environ.get('AEL_CAMVID_ROOT')
needs_camvid = pytest.mark.skipif(not (CAMVID_ROOT and Path(CAMVID_ROOT).is_dir()),
                                  reason='AEL_CAMVID_ROOT is not set to the CamVid (SegNet) folder')
IDS = [f'img{k:04d}' for k in range(367)]


# ---------------------------------------------------------------- drawing
def test_draw_is_deterministic_and_portable():
    a = make_manifest('camvid', IDS, '1/8', fold=3, seed=7)
    b = make_manifest('camvid', IDS[::-1], 0.125, fold=3, seed=7)
    assert a == b and len(a.labeled) == 46 and len(a.unlabeled) == 321
    # the documented rule, re-derived without the kit's helpers
    rank = sorted(IDS, key=lambda i: hashlib.sha256(f'7:3:{i}'.encode()).hexdigest())
    assert a.labeled == sorted(rank[:46])


def test_folds_differ_partitions_nest():
    folds = [set(make_manifest('camvid', IDS, '1/8', fold=f).labeled) for f in range(5)]
    assert len({frozenset(f) for f in folds}) == 5
    for f in range(5):
        small = set(make_manifest('camvid', IDS, '1/16', fold=f).labeled)
        assert small < folds[f] < set(make_manifest('camvid', IDS, '1/4', fold=f).labeled)
    assert draw_order(IDS, seed=0, fold=1) != draw_order(IDS, seed=1, fold=0)


@pytest.mark.parametrize('frac,n', [('1/2', 184), ('1/4', 92), ('1/8', 46), ('1/16', 23), ('1/32', 11)])
def test_fraction_sizes(frac, n):
    m = make_manifest('camvid', IDS, frac)
    assert len(m.labeled) == n and len(m.labeled) + len(m.unlabeled) == 367 and m.name == f"{frac.replace('/', '-')}_fold0"


def test_counts_with_separate_pools():
    train = [f'2007_{k:06d}' for k in range(1464)]
    aug = train + [f'2008_{k:06d}' for k in range(9118)]
    for n in (92, 183, 366, 732, 1464):
        m = make_manifest('voc', train, count=n, split='train_aug', unlabeled_ids=aug)
        assert len(m.labeled) == n and set(m.labeled) <= set(train) and len(m.unlabeled) == 10582 - n
    fine, extra = IDS, [f'extra{k:05d}' for k in range(6000)]
    for n in (1000, 3000, 5000):
        m = make_manifest('cityscapes', fine, count=n, split='train+train_extra', unlabeled_ids=fine + extra, drawn='unlabeled')
        assert m.labeled == sorted(fine) and len(m.unlabeled) == n and set(m.unlabeled) <= set(extra)
    with pytest.raises(ValueError, match='cannot draw 400 of 367'): make_manifest('camvid', IDS, count=400)


# ---------------------------------------------------------------- files
def test_save_load_roundtrip_and_hash(tmp_path):
    m = make_manifest('camvid', IDS, '1/4', fold=2)
    p = save_manifest(m, tmp_path/'camvid'/'x.json')
    back = load_manifest(p)
    assert back == m and back.path == str(p) and manifest_hash(p) == manifest_hash(m)
    d = json.loads(p.read_text())
    assert d['format'] == 'ael_nb.manifest/1' and d['num_labeled'] == 92 and d['provenance']['source'] == 'generated'
    d['labeled'] = d['labeled'][::-1]; d['provenance'] = {}; d['name'] = 'other'
    (tmp_path/'y.json').write_text(json.dumps(d))
    assert manifest_hash(tmp_path/'y.json') == manifest_hash(m)      # content hash: order/provenance/name free


def test_failed_save_keeps_old_file(tmp_path):
    p = save_manifest(make_manifest('camvid', IDS, '1/8'), tmp_path/'m.json'); before = p.read_text()
    bad = Manifest('camvid', 'train', ['a', 'b'], ['b'])
    with pytest.raises(DataError, match='both labeled and unlabeled'): save_manifest(bad, p)
    assert p.read_text() == before and sorted(os.listdir(tmp_path)) == ['m.json']


MALFORMED = {
    'not_json': ('{"dataset": "camvid", "split": ', 'not valid JSON: .* at line 1'),
    'array': ('["a"]', 'expected a JSON object, got list'),
    'missing_key': ('{"dataset": "camvid", "split": "train", "labeled": ["a"]}', r"missing keys \['unlabeled'\]"),
    'unknown_key': ('{"dataset": "camvid", "split": "train", "labeled": ["a"], "unlabeled": [], "labelled": []}', 'unknown keys'),
    'wrong_type': ('{"dataset": "camvid", "split": "train", "labeled": "a", "unlabeled": []}', 'must be a list of id strings'),
    'int_ids': ('{"dataset": "camvid", "split": "train", "labeled": [1, 2], "unlabeled": []}', 'must be a list of id strings'),
    'dup': ('{"dataset": "camvid", "split": "train", "labeled": ["a", "a"], "unlabeled": []}', 'listed twice'),
    'overlap': ('{"dataset": "camvid", "split": "train", "labeled": ["a"], "unlabeled": ["a"]}', 'both labeled and unlabeled'),
    'empty': ('{"dataset": "camvid", "split": "train", "labeled": [], "unlabeled": ["a"]}', 'no labeled ids'),
    'count': ('{"dataset": "camvid", "split": "train", "labeled": ["a"], "unlabeled": [], "num_unlabeled": 3}', '"num_unlabeled" is 3'),
    'format': ('{"format": "x/9", "dataset": "camvid", "split": "train", "labeled": ["a"], "unlabeled": []}', 'unknown format'),
    'fold': ('{"dataset": "camvid", "split": "train", "labeled": ["a"], "unlabeled": [], "fold": -1}', '"fold" must be an integer'),
}


@pytest.mark.parametrize('case', list(MALFORMED))
def test_malformed_manifest(tmp_path, case):
    text, msg = MALFORMED[case]
    p = tmp_path/f'{case}.json'; p.write_text(text)
    with pytest.raises(DataError, match=rf'{case}.json: .*{msg}'): load_manifest(p)


def test_binary_and_missing_manifest(tmp_path):
    (tmp_path/'b.json').write_bytes(b'\xff\xfe\x00garbage')
    with pytest.raises(DataError, match='b.json'): load_manifest(tmp_path/'b.json')
    with pytest.raises(DataError, match='manifest file is missing'): load_manifest(tmp_path/'none.json')


# ---------------------------------------------------------------- verification against data
@pytest.fixture
def camvid(tmp_path): return CamVid(make_fixture('camvid', tmp_path/'camvid', n=8), 'train')


def test_verify_ok_and_datasets(camvid, tmp_path):
    m = make_manifest('camvid', camvid.ids, '1/4')
    assert verify_manifest(m, camvid) is m
    lab, unl = manifest_datasets(save_manifest(m, tmp_path/'m.json'), root=camvid.root, check=True)
    assert lab.ids == m.labeled and unl.ids == m.unlabeled and unl[0]['label'] is None and lab[0]['label'] is not None


def test_verify_id_that_does_not_exist(camvid):
    m = make_manifest('camvid', camvid.ids + ['0016E5_99999'], count=8)
    with pytest.raises(DataError, match=r"ids do not exist in CamVid.*\['0016E5_99999'\]"): verify_manifest(m, camvid)


def test_verify_other_failures(camvid, tmp_path):
    m = make_manifest('camvid', camvid.ids, count=2)
    with pytest.raises(DataError, match='labeled ids have no label'): verify_manifest(m, camvid.subset(camvid.ids, drop_labels=True))
    with pytest.raises(DataError, match="for dataset 'voc', not 'camvid'"):
        verify_manifest(make_manifest('voc', camvid.ids, count=2), camvid)
    camvid.item(m.labeled[0])[2].unlink()
    with pytest.raises(DataError, match='1 listed files are missing'): verify_manifest(m, camvid)
    p = save_manifest(m, tmp_path/'named.json')
    with pytest.raises(DataError, match='named.json: 1 listed files'): verify_manifest(load_manifest(p), camvid)


# ---------------------------------------------------------------- importers
def test_import_unimatch(tmp_path):
    cs = Cityscapes(make_fixture('cityscapes', tmp_path/'cs', n=6))
    d = tmp_path/'splits'/'cityscapes'/'1_2'; d.mkdir(parents=True)
    line = lambda i: f'leftImg8bit/train/{i.split("_")[0]}/{i}_leftImg8bit.png gtFine/train/{i.split("_")[0]}/{i}_gtFine_labelTrainIds.png\n'
    (d/'labeled.txt').write_text(''.join(line(i) for i in cs.ids[:3]))
    (d/'unlabeled.txt').write_text(''.join(line(i) for i in cs.ids[3:]))
    m = verify_manifest(import_unimatch(d, 'cityscapes'), cs)
    assert (m.labeled, m.unlabeled, m.fraction, m.seed) == (cs.ids[:3], cs.ids[3:], '1/2', None)
    assert m.provenance['format'] == 'unimatch' and len(m.provenance['files']) == 2
    assert m.provenance['files'][1]['sha256'] == hashlib.sha256((d/'unlabeled.txt').read_bytes()).hexdigest()


def test_import_u2pl(tmp_path):
    voc = VOC(make_fixture('voc', tmp_path/'voc', n=5), 'train_aug')
    d = tmp_path/'data'/'splits'/'pascal'/'2'; d.mkdir(parents=True)
    (d/'labeled.txt').write_text('\n'.join(voc.ids[:2]) + '\n')
    with pytest.raises(DataError, match='no unlabeled list beside it'): import_u2pl(d, 'voc', 'train_aug')
    m = verify_manifest(import_u2pl(d, 'voc', 'train_aug', pool=voc.ids), voc)
    assert m.count == 2 and len(m.unlabeled) == len(voc) - 2
    (d/'unlabeled.txt').write_text('\n'.join(voc.ids[2:5]) + '\n')
    m2 = import_u2pl(d/'labeled.txt', 'voc', 'train_aug')
    assert len(m2.unlabeled) == 3 and len(m2.provenance['files']) == 2


def test_import_cps(tmp_path):
    voc = VOC(make_fixture('voc', tmp_path/'voc', n=4), 'train_aug')
    (tmp_path/'train_aug_labeled_1-8.txt').write_text('\n'.join(voc.ids[:1]) + '\n')
    (tmp_path/'train_aug_unlabeled_1-8.txt').write_text(''.join(f'/JPEGImages/{i}.jpg\t/SegmentationClassAug/{i}.png\n' for i in voc.ids[1:]))
    m = verify_manifest(import_cps(tmp_path/'train_aug_labeled_1-8.txt', 'voc', 'train_aug'), voc)
    assert (m.fraction, m.name, len(m.labeled), len(m.unlabeled)) == ('1/8', 'cps_1-8', 1, len(voc) - 1)
    (tmp_path/'train_aug_labeled_1-8.txt').write_text(f'{voc.ids[0]}\n{voc.ids[0]}\n')
    with pytest.raises(DataError, match='train_aug_labeled_1-8.txt: 1 ids listed twice'): import_cps(tmp_path/'train_aug_labeled_1-8.txt', 'voc')
    (tmp_path/'train_aug_labeled_1-8.txt').write_text('\n')
    with pytest.raises(DataError, match='split list is empty'): import_cps(tmp_path/'train_aug_labeled_1-8.txt', 'voc')


# ---------------------------------------------------------------- the CLI, as a user runs it
def cli(*args, env=None):
    "Run `ael-splits` in a fresh interpreter, as a user would."
    code = 'import sys; from ael_nb.manifests import ael_splits; sys.exit(ael_splits())'
    return subprocess.run([sys.executable, '-c', code, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def run_inproc(capsys, *args):
    "The same entry point in this process (fast), for the many error cases."
    try: rc = ael_splits([str(a) for a in args])
    except SystemExit as e: rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.slow
def test_cli_end_to_end(tmp_path):
    root = make_fixture('camvid', tmp_path/'camvid', n=16); out = tmp_path/'manifests'
    r = cli('make', 'camvid', '--fraction', '1/8', '1/4', '--folds', '0-2', '--out', out, env={'AEL_CAMVID_ROOT': str(root)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.count('wrote') == 6 and (out/'camvid'/'1-4_fold2.json').is_file()
    m = load_manifest(out/'camvid'/'1-8_fold1.json')
    assert len(m.labeled) == 2 and m.provenance['command'] == 'ael-splits make camvid --split train --fraction 1/8 --folds 1 --seed 0'
    # a UniMatch split of the same images, imported and verified against the data
    d = tmp_path/'splits'/'camvid'/'1_8'; d.mkdir(parents=True)
    (d/'labeled.txt').write_text(''.join(f'train/{i}.png trainannot/{i}.png\n' for i in m.labeled))
    (d/'unlabeled.txt').write_text(''.join(f'train/{i}.png trainannot/{i}.png\n' for i in m.unlabeled))
    r = cli('import', 'unimatch', d, '--dataset', 'camvid', '--root', root, '--out', out)
    assert r.returncode == 0 and r.stdout.strip() == f"wrote {out/'camvid'/'unimatch_1_8.json'}", r.stderr
    imp = load_manifest(out/'camvid'/'unimatch_1_8.json')
    assert manifest_hash(imp) == manifest_hash(m) and imp.provenance['source'] == 'imported'
    r = cli('list', out)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 8 and r.stdout.count(manifest_hash(m)) == 2
    r = cli('verify', *sorted((out/'camvid').glob('*.json')), '--root', root, '--check')
    assert r.returncode == 0 and r.stdout.count('OK ') == 7, r.stderr
    r = cli('verify', tmp_path/'nope.json', '--root', root)
    assert r.returncode == 1 and 'nope.json: no such manifest file or folder' in r.stderr


def test_cli_errors(tmp_path, capsys):
    root = make_fixture('camvid', tmp_path/'camvid', n=4); out = tmp_path/'o'
    assert run_inproc(capsys, 'make', 'camvid', '--root', root, '--count', '1', '--out', out)[0] == 0
    rc, so, _ = run_inproc(capsys, 'make', 'camvid', '--root', root, '--count', '1', '--out', out)
    assert rc == 0 and so.startswith('unchanged')
    rc, _, err = run_inproc(capsys, 'make', 'camvid', '--root', root, '--count', '1', '--seed', '3', '--out', out/'camvid'/'1_fold0.json')
    assert rc == 1 and 'exists with different content' in err
    bad = tmp_path/'bad.json'; bad.write_text('{"dataset": "camvid"')
    rc, _, err = run_inproc(capsys, 'verify', bad, '--root', root)
    assert rc == 1 and 'bad.json: not valid JSON' in err
    ghost = save_manifest(make_manifest('camvid', CamVid(root).ids + ['ghost'], count=5), tmp_path/'ghost.json')
    rc, _, err = run_inproc(capsys, 'verify', ghost, '--root', root)
    assert rc == 1 and "['ghost']" in err
    rc, _, err = run_inproc(capsys, 'make', 'camvid', '--root', root)          # neither --fraction nor --count
    assert rc == 2 and 'one of the arguments --fraction --count is required' in err
    rc, _, err = run_inproc(capsys, 'make', 'camvid', '--root', tmp_path/'nowhere', '--count', '1', '--out', out)
    assert rc == 1 and 'camvid dataset folder does not exist' in err
    rc, _, err = run_inproc(capsys, 'make', 'camvid', '--root', root, '--count', '9', '--out', out)
    assert rc == 2 and 'cannot draw 9 of 4' in err                             # a usage error
    rc, _, err = run_inproc(capsys, 'import', 'u2pl', tmp_path/'no_such_dir', '--dataset', 'camvid', '--root', root)
    assert rc == 1 and 'split list is missing' in err


def test_console_script_installed():
    exe = Path(sys.executable).parent/'ael-splits'
    if not exe.is_file(): pytest.skip('ael-splits console script not installed in this environment')
    r = subprocess.run([str(exe), 'list', SHIPPED], capture_output=True, text=True)
    assert r.returncode == 0 and 'camvid' in r.stdout


# ---------------------------------------------------------------- careless input to `ael-splits import`
VOC_IDS = [f'2007_{k:06d}' for k in range(40)]
CS_IDS = [f'aachen_{k:06d}_000019' for k in range(8)]
UNIMATCH = os.environ.get('AEL_UNIMATCH_SPLITS')     # the 'splits' folder of LiheYoung/UniMatch
needs_unimatch = pytest.mark.skipif(not (UNIMATCH and Path(UNIMATCH).is_dir()), reason='AEL_UNIMATCH_SPLITS is not set to UniMatch\'s splits folder')


def lists(folder, labeled, unlabeled, fmt=lambda i: f'JPEGImages/{i}.jpg SegmentationClass/{i}.png', encoding='utf-8'):
    folder.mkdir(parents=True, exist_ok=True)
    (folder/'labeled.txt').write_text(''.join(fmt(i) + '\n' for i in labeled), encoding=encoding)
    (folder/'unlabeled.txt').write_text(''.join(fmt(i) + '\n' for i in unlabeled), encoding=encoding)
    return folder


def test_cps_unlabeled_file_refused_as_labeled(tmp_path, capsys):
    (tmp_path/'train_aug_labeled_1-8.txt').write_text('\n'.join(VOC_IDS[:5]) + '\n')
    (tmp_path/'train_aug_unlabeled_1-8.txt').write_text('\n'.join(VOC_IDS[5:]) + '\n')
    for fmt in ('u2pl', 'unimatch', 'cps'):
        rc, _, err = run_inproc(capsys, 'import', fmt, tmp_path/'train_aug_unlabeled_1-8.txt', '--dataset', 'voc', '--out', tmp_path/'o')
        assert rc == 1 and 'train_aug_unlabeled_1-8.txt' in err and not (tmp_path/'o').exists(), (fmt, err)
    rc, out, err = run_inproc(capsys, 'import', 'cps', tmp_path/'train_aug_labeled_1-8.txt', '--dataset', 'voc', '--out', tmp_path/'o')
    m = load_manifest(tmp_path/'o'/'voc'/'cps_1-8.json')
    assert rc == 0 and (len(m.labeled), len(m.unlabeled)) == (5, 35), err


def test_import_without_root_checks_what_it_can(tmp_path, capsys):
    d = lists(tmp_path/'splits'/'pascal'/'92', VOC_IDS[:4], VOC_IDS[4:]); out = tmp_path/'o'
    rc, _, err = run_inproc(capsys, 'import', 'unimatch', d, '--dataset', 'pascal', '--out', out)
    assert rc == 2 and "unknown dataset 'pascal'" in err and 'use --dataset voc' in err
    rc, _, err = run_inproc(capsys, 'import', 'unimatch', d, '--dataset', 'voc', '--split', 'trainaug', '--out', out)
    assert rc == 2 and "has no split 'trainaug'" in err
    cs = lists(tmp_path/'splits'/'cityscapes'/'1_2', CS_IDS[:4], CS_IDS[4:], lambda i: f'leftImg8bit/train/aachen/{i}_leftImg8bit.png')
    rc, _, err = run_inproc(capsys, 'import', 'unimatch', cs, '--dataset', 'voc', '--out', out)
    assert rc == 1 and '8 of 8 ids do not look like voc ids' in err and str(cs) in err
    big = lists(tmp_path/'big'/'92', [f'2008_{k:06d}' for k in range(92)], [f'2008_{k:06d}' for k in range(92, 1500)])
    rc, _, err = run_inproc(capsys, 'import', 'unimatch', big, '--dataset', 'voc', '--split', 'train', '--out', out)
    assert rc == 1 and "1500 ids, but voc 'train' has 1464 images" in err and "split 'train_aug'" in err
    assert not out.exists()
    # a BOM and Windows paths are read as the ids they stand for; the output says the files were not checked
    win = lists(tmp_path/'win'/'1_8', VOC_IDS[:5], VOC_IDS[5:], lambda i: f'JPEGImages\\{i}.jpg SegmentationClass\\{i}.png', 'utf-8-sig')
    rc, so, err = run_inproc(capsys, 'import', 'unimatch', win, '--dataset', 'voc', '--out', out)
    m = load_manifest(out/'voc'/'unimatch_1_8.json')
    assert rc == 0 and m.labeled == VOC_IDS[:5] and m.unlabeled == VOC_IDS[5:] and m.split == 'train_aug', err
    assert so.splitlines()[1] == 'note: ids not checked against files (no --root); dataset, split and id shape checked'


def test_u2pl_without_root_when_unlabeled_list_exists(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv('AEL_VOC_ROOT', raising=False)
    d = tmp_path/'data'/'splits'/'pascal'/'4'; d.mkdir(parents=True)
    (d/'labeled.txt').write_text('\n'.join(VOC_IDS[:4]) + '\n')
    rc, _, err = run_inproc(capsys, 'import', 'u2pl', d, '--dataset', 'voc', '--out', tmp_path/'o')
    assert rc == 1 and 'no root given and $AEL_VOC_ROOT is not set' in err        # the rest of the split needs the data
    (d/'unlabeled.txt').write_text('\n'.join(VOC_IDS[4:]) + '\n')
    rc, _, err = run_inproc(capsys, 'import', 'u2pl', d, '--dataset', 'voc', '--out', tmp_path/'o')
    m = load_manifest(tmp_path/'o'/'voc'/'u2pl_4.json')
    assert rc == 0 and (m.count, len(m.labeled), len(m.unlabeled)) == (4, 4, 36), err


def test_import_provenance_is_resolved_with_command(tmp_path, capsys, monkeypatch):
    lists(tmp_path/'splits'/'1_8', VOC_IDS[:5], VOC_IDS[5:])
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_inproc(capsys, 'import', 'unimatch', 'splits/1_8', '--dataset', 'voc', '--out', 'o')
    prov = load_manifest(tmp_path/'o'/'voc'/'unimatch_1_8.json').provenance
    assert rc == 0, err
    assert [f['path'] for f in prov['files']] == [str((tmp_path/'splits'/'1_8'/n).resolve()) for n in ('labeled.txt', 'unlabeled.txt')]
    assert prov['command'] == f"ael-splits import unimatch {(tmp_path/'splits'/'1_8').resolve()} --dataset voc --split train_aug"


def test_split_in_file_name_and_force_keeps_other_splits(tmp_path, capsys):
    d = lists(tmp_path/'s'/'1_8', VOC_IDS[:5], VOC_IDS[5:]); out = tmp_path/'o'
    assert run_inproc(capsys, 'import', 'unimatch', d, '--dataset', 'voc', '--out', out)[0] == 0
    assert run_inproc(capsys, 'import', 'unimatch', d, '--dataset', 'voc', '--split', 'val', '--out', out)[0] == 0
    assert sorted(p.name for p in (out/'voc').iterdir()) == ['unimatch_1_8.json', 'val_unimatch_1_8.json']
    assert load_manifest(out/'voc'/'unimatch_1_8.json').split == 'train_aug'
    rc, _, err = run_inproc(capsys, 'import', 'unimatch', d, '--dataset', 'voc', '--split', 'val', '--out', out/'voc'/'unimatch_1_8.json', '--force')
    assert rc == 1 and "holds a voc 'train_aug' manifest, not voc 'val'" in err
    assert load_manifest(out/'voc'/'unimatch_1_8.json').split == 'train_aug'
    root = make_fixture('camvid', tmp_path/'camvid', n=8)             # `make` names other splits the same way
    assert run_inproc(capsys, 'make', 'camvid', '--root', root, '--split', 'val', '--count', '2', '--out', out)[0] == 0
    assert load_manifest(out/'camvid'/'val_2_fold0.json').split == 'val'


@pytest.mark.parametrize('broken,fault', [('{"dataset": "camvid"', 'not valid JSON'),
                                          ('{"dataset": "camvid", "split": "train"}', "missing keys ['labeled', 'unlabeled']")])
def test_force_replaces_a_broken_manifest(tmp_path, capsys, broken, fault):
    "A file in the way that is no manifest: named with its own fault (not the new draw's), and --force replaces it."
    root = make_fixture('camvid', tmp_path/'camvid', n=4); out = tmp_path/'o'; path = out/'camvid'/'1_fold0.json'
    path.parent.mkdir(parents=True); path.write_text(broken)
    rc, _, err = run_inproc(capsys, 'make', 'camvid', '--root', root, '--count', '1', '--out', out)
    assert rc == 1 and f'{path}: the existing file is not a readable manifest ({fault}' in err and '--force replaces it' in err, err
    assert path.read_text() == broken
    rc, so, err = run_inproc(capsys, 'make', 'camvid', '--root', root, '--count', '1', '--out', out, '--force')
    assert rc == 0 and so.strip() == f'wrote {path}', err
    assert len(load_manifest(path).labeled) == 1
    d = lists(tmp_path/'s'/'1_8', VOC_IDS[:5], VOC_IDS[5:]); target = out/'voc'/'unimatch_1_8.json'   # import alike
    target.parent.mkdir(parents=True); target.write_text(broken)
    assert run_inproc(capsys, 'import', 'unimatch', d, '--dataset', 'voc', '--out', out)[0] == 1
    rc, so, err = run_inproc(capsys, 'import', 'unimatch', d, '--dataset', 'voc', '--out', out, '--force')
    assert rc == 0 and so.startswith(f'wrote {target}') and load_manifest(target).labeled == VOC_IDS[:5], err


def test_import_help_and_usage_errors(capsys):
    rc, out, _ = run_inproc(capsys, 'import', '--help'); out = ' '.join(out.split())    # argparse wraps lines
    assert rc == 0 and 'VOC is voc, not pascal' in out and "default: the dataset's training split" in out and 'overwrite an existing' in out
    rc, _, err = run_inproc(capsys, 'import', 'unimatch', 'x')                       # no --dataset
    assert rc == 2 and 'the following arguments are required: --dataset' in err
    rc, _, err = run_inproc(capsys, 'make', 'kitti', '--count', '1')
    assert rc == 2 and "unknown dataset 'kitti'" in err


@needs_unimatch
def test_real_unimatch_splits_without_root(tmp_path, capsys):
    "Every published UniMatch split of VOC and Cityscapes imports without the data and passes the checks that need none."
    sizes = {'voc': 10582, 'cityscapes': 2975}
    for dataset, folder in (('voc', 'pascal'), ('cityscapes', 'cityscapes')):
        for d in sorted(p for p in (Path(UNIMATCH)/folder).iterdir() if (p/'labeled.txt').is_file()):
            rc, so, err = run_inproc(capsys, 'import', 'unimatch', d, '--dataset', dataset, '--out', tmp_path)
            assert rc == 0, (d, err)
            m = load_manifest(so.split()[1])
            assert m.split == ('train_aug' if dataset == 'voc' else 'train') and len(m.labeled) + len(m.unlabeled) == sizes[dataset], d


# ---------------------------------------------------------------- shipped manifests
def test_shipped_manifests_are_well_formed():
    files = sorted(SHIPPED.rglob('*.json'))
    names = {(p.parent.name, p.stem) for p in files}
    for frac in ('1-2', '1-4', '1-8', '1-16'):
        for f in range(5): assert ('camvid', f'{frac}_fold{f}') in names
    for frac in ('1-4', '1-8', '1-16'):
        for f in range(3): assert ('synthetic', f'{frac}_fold{f}') in names
    for p in files:
        m = load_manifest(p)
        assert m.name == p.stem and m.dataset == p.parent.name
        if m.provenance['source'] == 'imported': continue   # checked in test_shipped_imported_manifests
        assert m.provenance['source'] == 'generated' and m.provenance['command'].startswith(f'ael-splits make {m.dataset} ')
    assert (SHIPPED/'README.md').is_file()


def test_shipped_imported_manifests():
    "Cityscapes and VOC: imported from UniMatch's lists; each records its two source files and their SHA-256."
    files = sorted(SHIPPED.glob('cityscapes/*.json')) + sorted(SHIPPED.glob('voc/*.json'))
    assert {p.stem for p in files} >= {'unimatch_1_16', 'unimatch_92', 'unimatch_1464'}
    for p in files:
        m = load_manifest(p)
        assert m.provenance['source'] == 'imported' and m.provenance['format'] == 'unimatch'
        assert [Path(f['path']).name for f in m.provenance['files']] == ['labeled.txt', 'unlabeled.txt']
        for f in m.provenance['files']:
            src = REPO / f['path']
            if src.is_file():   # the workspace's copy of the lists: the ids and the hash must still match
                assert hashlib.sha256(src.read_bytes()).hexdigest() == f['sha256'], src
        if (REPO / m.provenance['files'][0]['path']).is_file():
            again = import_unimatch(REPO / Path(m.provenance['files'][0]['path']).parent, m.dataset, m.split)
            assert manifest_hash(again) == manifest_hash(m), p
    m = load_manifest(SHIPPED/'cityscapes'/'unimatch_1_16.json')
    assert (m.dataset, m.split, len(m.labeled), len(m.labeled) + len(m.unlabeled)) == ('cityscapes', 'train', 186, 2975)


@needs_camvid
def test_shipped_camvid_manifests_verify_and_regenerate():
    ds = CamVid(CAMVID_ROOT, 'train')
    for p in sorted((SHIPPED/'camvid').glob('*.json')):
        m = verify_manifest(load_manifest(p), ds)
        again = make_manifest('camvid', ds.ids, m.fraction, fold=m.fold, seed=m.seed)
        assert manifest_hash(again) == manifest_hash(m), p
        assert len(m.labeled) + len(m.unlabeled) == 367


def test_shipped_synthetic_manifests_verify_and_regenerate():
    from ael_nb.registry import get_dataset
    ds = get_dataset('synthetic', split='train')
    files = sorted((SHIPPED/'synthetic').glob('*.json'))
    assert files
    for p in files:
        m = verify_manifest(load_manifest(p), ds)
        assert manifest_hash(make_manifest('synthetic', ds.ids, m.fraction, fold=m.fold, seed=m.seed)) == manifest_hash(m), p

"Loaders on tiny fixtures in every layout, every bad-input error, and the real CamVid when AEL_CAMVID_ROOT is set."
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from ael_nb.core import DataError
from ael_nb.datasets import (ADE20K, CAMVID_INFO, CITYSCAPES_INFO, VOC, CamVid, Cityscapes, ImageFolder, SegDataset,
                             colorize, make_fixture, read_image, read_label)
from ael_nb.registry import DATASETS, get_dataset

CAMVID_ROOT = os.environ.get('AEL_CAMVID_ROOT')
needs_camvid = pytest.mark.skipif(not (CAMVID_ROOT and Path(CAMVID_ROOT).is_dir()),
                                  reason='AEL_CAMVID_ROOT is not set to the CamVid (SegNet) folder')


def _loaders(tmp_path):
    "One loaded fixture per layout: name -> (dataset, a label file of its first sample)."
    out = {'camvid': CamVid(make_fixture('camvid', tmp_path/'camvid'), 'train'),
           'cityscapes': Cityscapes(make_fixture('cityscapes', tmp_path/'cs')),
           'cityscapes_ids': Cityscapes(make_fixture('cityscapes', tmp_path/'csi', label_ids=True)),
           'voc': VOC(make_fixture('voc', tmp_path/'voc'), 'train_aug'),
           'ade20k': ADE20K(make_fixture('ade20k', tmp_path/'ade'), 'training')}
    return out


# raw value that must be rejected per layout (one above the valid range)
OUT_OF_RANGE = {'camvid': 12, 'cityscapes': 19, 'cityscapes_ids': 34, 'voc': 21, 'ade20k': 151}


@pytest.fixture
def loaders(tmp_path): return _loaders(tmp_path)


def test_every_fixture_loads_and_checks(loaders):
    for name, ds in loaders.items():
        ds.check()
        s = ds[0]
        assert s['image'].dtype == torch.uint8 and s['image'].shape[0] == 3, name
        assert s['label'].dtype == torch.int64 and s['label'].shape == s['image'].shape[1:], name
        vals = set(s['label'].unique().tolist())
        assert vals <= set(range(ds.info.num_classes)) | {255}, (name, vals)
        assert 255 in vals, name                      # the fixtures' bottom row is ignore in every layout
        assert isinstance(s['id'], str) and s['id'] == ds.ids[0]


def test_cityscapes_label_ids_match_train_ids(loaders):
    a, b = loaders['cityscapes'], loaders['cityscapes_ids']
    assert a.ids == b.ids
    assert b.items[0][2].name.endswith('_gtFine_labelIds.png')
    for k in range(len(a)): assert torch.equal(a[k]['label'], b[k]['label'])


def test_cityscapes_extra_is_unlabeled(tmp_path):
    root = make_fixture('cityscapes', tmp_path/'cs', n=2, extra=3)
    ds = Cityscapes(root, extra=True)
    assert ds.split == 'train+train_extra' and len(ds) == 5 and not ds.labeled
    assert [ds.has_label(i) for i in ds.ids].count(False) == 3
    assert Cityscapes(root, split='train+train_extra').ids == ds.ids
    assert len(Cityscapes(root)) == 2 and Cityscapes(root).labeled


def test_voc_palette_png_gives_indices(loaders):
    voc = loaders['voc']
    p = voc.items[0][2]
    assert Image.open(p).mode == 'P'
    raw = read_label(p)
    assert raw.max() == 255 and raw[raw != 255].max() <= 20   # indices, not RGB values
    assert torch.equal(voc[0]['label'], torch.from_numpy(raw))


def test_ade20k_shift(loaders):
    ade = loaders['ade20k']
    raw = read_label(ade.items[0][2]); lab = ade[0]['label'].numpy()
    assert (lab[raw == 0] == 255).all() and (lab[raw > 0] == raw[raw > 0] - 1).all()


def test_camvid_list_paths_are_resolved_under_root(tmp_path):
    root = make_fixture('camvid', tmp_path/'cv')
    assert (root/'train.txt').read_text().startswith('/SegNet/CamVid/train/')
    ds = CamVid(root, 'train')
    assert all(str(ip).startswith(str(root)) for _, ip, _ in ds.items)


def test_image_folder_unlabeled_and_with_masks(tmp_path):
    root = make_fixture('folder', tmp_path/'imgs', n=4)
    ds = ImageFolder(root, CAMVID_INFO)
    assert not ds.labeled and ds[0]['label'] is None and ds.ids == ['a/img1', 'a/img3', 'b/img0', 'b/img2']
    h, w = ds[0]['image'].shape[1:]
    (tmp_path/'masks'/'a').mkdir(parents=True)
    Image.fromarray(np.full((h, w), 3, np.uint8)).save(tmp_path/'masks'/'a'/'img1.png')
    ds = ImageFolder(root, CAMVID_INFO, label_dir=tmp_path/'masks')
    assert ds.has_label('a/img1') and not ds.has_label('b/img0') and int(ds[0]['label'].max()) == 3
    with pytest.raises(DataError, match='no images'): ImageFolder(_empty(tmp_path), CAMVID_INFO)


def _empty(tmp_path):
    d = tmp_path/'empty'; d.mkdir(); return d


# ---------------------------------------------------------------- bad input: every case names the file and the problem
@pytest.mark.parametrize('name', list(OUT_OF_RANGE))
def test_out_of_range_label(tmp_path, name):
    ds = _loaders(tmp_path)[name]
    lp = ds.items[1][2]
    raw = read_label(lp); raw[0, 0] = OUT_OF_RANGE[name]
    Image.fromarray(raw.astype(np.uint8)).save(lp)
    with pytest.raises(DataError, match=rf'{lp.name}: label values \[{OUT_OF_RANGE[name]}\] outside the allowed'):
        ds[1]
    with pytest.raises(DataError, match=lp.name): ds.check()


def test_corrupt_image_bytes(loaders):
    ds = loaders['camvid']; ip = ds.items[0][1]
    ip.write_bytes(b'\x89PNG\r\n\x1a\n this is not really a png')
    with pytest.raises(DataError, match=rf'{ip.name}: cannot read image'): ds[0]


def test_truncated_image(loaders):
    ds = loaders['voc']; ip = ds.items[0][1]
    big = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    Image.fromarray(big).save(ip, format='JPEG')
    data = ip.read_bytes(); ip.write_bytes(data[:len(data) // 2])
    with pytest.raises(DataError, match=rf'{ip.name}: cannot read image'): read_image(ip)


def test_truncated_label(loaders):
    ds = loaders['cityscapes']; lp = ds.items[0][2]
    Image.fromarray(np.random.default_rng(0).integers(0, 19, (64, 64), dtype=np.uint8)).save(lp)
    data = lp.read_bytes(); lp.write_bytes(data[:len(data) // 2])
    with pytest.raises(DataError, match=rf'{lp.name}: cannot read label'): ds[0]


def test_missing_image_and_label(loaders):
    ds = loaders['ade20k']
    ds.items[0][1].unlink(); ds.items[1][2].unlink()
    with pytest.raises(DataError, match='image file is missing'): ds[0]
    with pytest.raises(DataError, match='label file is missing'): ds[1]


def test_rgb_label_rejected(loaders):
    ds = loaders['camvid']; lp = ds.items[0][2]
    Image.fromarray(np.zeros((16, 24, 3), np.uint8)).save(lp)
    with pytest.raises(DataError, match=rf'{lp.name}: label image has mode RGB'): ds[0]


def test_size_mismatch(loaders):
    ds = loaders['voc']; lp = ds.items[2][2]
    Image.fromarray(np.zeros((10, 24), np.uint8)).save(lp)
    with pytest.raises(DataError, match=rf'{lp.name}: label size 24x10 differs from image size 24x16'): ds[2]


def test_check_reports_every_bad_file(loaders):
    ds = loaders['camvid']
    ds.items[0][1].write_bytes(b'junk'); ds.items[2][2].unlink(); ds.items[3][1].unlink()
    with pytest.raises(DataError) as e: ds.check()
    msg = str(e.value)
    assert e.value.path == str(ds.items[0][1]) and 'and 2 more bad samples' in msg
    assert ds.items[2][2].name in msg and ds.items[3][1].name in msg


def test_unknown_ids_in_subset(loaders):
    ds = loaders['camvid']
    with pytest.raises(DataError, match=r"2 unknown ids in subset of CamVid split 'train': \['nope', 'zzz'\]"):
        ds.subset([ds.ids[0], 'nope', 'zzz'])
    with pytest.raises(DataError, match='given twice'): ds.subset([ds.ids[0], ds.ids[0]])
    sub = ds.subset(ds.ids[::-1][:2], drop_labels=True)
    assert sub.ids == ds.ids[::-1][:2] and sub[0]['label'] is None and ds[0]['label'] is not None


def test_missing_split_and_root(tmp_path, monkeypatch):
    root = make_fixture('camvid', tmp_path/'cv')
    with pytest.raises(DataError, match="CamVid split 'test'"): CamVid(root, 'test')
    with pytest.raises(DataError, match="Cityscapes split 'train' not found"): Cityscapes(root)
    with pytest.raises(DataError, match="VOC split list 'train_aug' not found"): VOC(root)
    with pytest.raises(DataError, match="ADE20K split 'training' not found"): ADE20K(root)
    monkeypatch.delenv('AEL_VOC_ROOT', raising=False)
    with pytest.raises(DataError, match=r'\$AEL_VOC_ROOT is not set'): VOC()
    (root/'train.txt').write_text('/SegNet/CamVid/train/a.png b c\n')
    with pytest.raises(DataError, match='train.txt: line 1: expected "image label", got 3 fields'): CamVid(root)


def test_get_dataset_by_name_and_env(tmp_path, monkeypatch):
    root = make_fixture('ade20k', tmp_path/'ade')
    monkeypatch.setenv('AEL_ADE20K_ROOT', str(root))
    assert get_dataset('ade20k', split='val').ids == ADE20K(root, 'validation').ids
    assert set(DATASETS) >= {'camvid', 'cityscapes', 'voc', 'ade20k'}
    with pytest.raises(KeyError, match="unknown dataset 'kitti'"): get_dataset('kitti')


def test_synthetic_by_name():
    ds = get_dataset('synthetic', split='train')
    assert isinstance(ds, SegDataset) and 'synthetic' in DATASETS and len(ds) > 0
    s = ds[0]
    assert s['image'].dtype == torch.uint8 and s['label'].dtype == torch.int64 and s['id'] == ds.ids[0]


def test_empty_split_names_its_folder(tmp_path):
    "An empty split is an error naming the folder or list file, never a dataset of 0 images (mIoU nan, 'best -100.0')."
    import shutil
    cv = make_fixture('camvid', tmp_path/'camvid')
    (cv/'val.txt').unlink(); shutil.rmtree(cv/'val'); (cv/'val').mkdir()
    with pytest.raises(DataError, match=r"camvid/val: split 'val' holds no images"): CamVid(cv, 'val')
    (cv/'train.txt').write_text('# nothing listed\n')
    with pytest.raises(DataError, match=r"train.txt: split 'train' holds no images"): CamVid(cv, 'train')
    cs = make_fixture('cityscapes', tmp_path/'cs'); shutil.rmtree(cs/'leftImg8bit'/'val'); (cs/'leftImg8bit'/'val').mkdir()
    with pytest.raises(DataError, match=r"leftImg8bit/val: split 'val' holds no images"): Cityscapes(cs, 'val')
    voc = make_fixture('voc', tmp_path/'voc'); (voc/'ImageSets'/'Segmentation'/'val.txt').write_text('\n')
    with pytest.raises(DataError, match=r"val.txt: split 'val' holds no images"): VOC(voc, 'val')
    ade = make_fixture('ade20k', tmp_path/'ade'); shutil.rmtree(ade/'images'/'validation'); (ade/'images'/'validation').mkdir()
    with pytest.raises(DataError, match=r"images/validation: split 'validation' holds no images"): ADE20K(ade, 'validation')


def test_colorize():
    lab = torch.tensor([[0, 18], [255, 3]])
    rgb = colorize(lab, CITYSCAPES_INFO)
    assert rgb.shape == (2, 2, 3) and rgb.dtype == np.uint8
    assert tuple(rgb[0, 0]) == (128, 64, 128) and tuple(rgb[0, 1]) == (119, 11, 32) and tuple(rgb[1, 0]) == (0, 0, 0)


# ---------------------------------------------------------------- the real CamVid
@needs_camvid
def test_real_camvid_train_val():
    tr, va = CamVid(CAMVID_ROOT, 'train'), CamVid(CAMVID_ROOT, 'val')
    assert (len(tr), len(va)) == (367, 101) and not set(tr.ids) & set(va.ids)
    listed = [Path(l.split()[0]).stem for l in (Path(CAMVID_ROOT)/'train.txt').read_text().splitlines() if l.strip()]
    assert tr.ids == listed
    tr.check()                                      # every file decodes, sizes match, values in 0..10 or 255
    s = tr[0]
    assert s['image'].shape == (3, 360, 480) and s['label'].shape == (360, 480)
    assert set(s['label'].unique().tolist()) <= set(range(11)) | {255}

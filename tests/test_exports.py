"""Labelling-tool exports read in place: each sample written here to its format's published description, read pixel
for pixel against the intended train ids; each mistake one line naming the file; each family trains a tiny run."""
import base64, csv, io, json
from pathlib import Path
import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw
from ael_nb.core import DataError
from ael_nb.datasets import voc_palette, CITYSCAPES_ID_TO_TRAINID
from ael_nb.exports import Rules, find_export
from ael_nb.folder import FolderDataset, ael_data, check_folder
from ael_nb.cli import ael_train
from test_folder import TRAIN

H, W = 24, 32
rng = np.random.default_rng(0)


def found(out):
    "The line `ael-data check` says what it found in (after the tail line the dataset prints)."
    return next(l for l in out.splitlines() if l.startswith('found '))


def photo(path, size=(W, H)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(path)
    return path


def rle_counts(m):
    "COCO's uncompressed RLE of a binary mask: run lengths in column-major order, starting with a run of 0s."
    flat, counts, cur, n = m.T.reshape(-1), [], 0, 0
    for v in flat:
        if v != cur: counts.append(n); cur, n = v, 0
        n += 1
    return counts + [n]


# ---- COCO instances JSON (CVAT / Label Studio layout: images/ + annotations/instances_<split>.json) ----

CATS = [{'id': 2, 'name': 'car', 'supercategory': 'vehicle'}, {'id': 5, 'name': 'person', 'supercategory': 'human'},
        {'id': 9, 'name': 'sign', 'supercategory': 'object'}]


def rect(x0, y0, x1, y1): return [x0, y0, x1, y0, x1, y1, x0, y1]


def with_box(a):
    "An annotation with COCO's `area` and `bbox` [x, y, w, h] of its segmentation (pycocotools computes them)."
    from pycocotools import mask as M
    seg = a['segmentation']
    r = M.merge(M.frPyObjects(seg, H, W)) if isinstance(seg, list) else M.frPyObjects(seg, H, W) if isinstance(seg['counts'], list) else \
        dict(size=seg['size'], counts=seg['counts'].encode())
    a['area'], a['bbox'] = float(M.area(r)), [float(v) for v in M.toBbox(r)]
    return a


def write_coco(root):
    "a: a car polygon, a person polygon over it (later), a crowd of persons (uncompressed RLE), a sign (compressed RLE);"
    "b: no annotation; c: a car; val d: a car. Train ids: background 0, car 1, person 2, sign 3 (category ids 2, 5, 9)."
    from pycocotools import mask as M
    root = Path(root)
    for n in 'abc': photo(root / 'images' / f'{n}.jpg')
    photo(root / 'images' / 'd.jpg')
    crowd = np.zeros((H, W), np.uint8); crowd[0:6, 20:24] = 1
    sign = np.zeros((H, W), np.uint8); sign[14:20, 26:30] = 1
    enc = M.encode(np.asfortranarray(sign)); enc['counts'] = enc['counts'].decode()
    anns = [dict(id=1, image_id=1, category_id=2, segmentation=[rect(2, 3, 12, 9)], iscrowd=0),
            dict(id=2, image_id=1, category_id=5, segmentation=[rect(8, 5, 18, 12)], iscrowd=0),
            dict(id=3, image_id=1, category_id=5, segmentation=dict(size=[H, W], counts=rle_counts(crowd)), iscrowd=1),
            dict(id=4, image_id=1, category_id=9, segmentation=enc, iscrowd=0),
            dict(id=5, image_id=3, category_id=2, segmentation=[rect(0, 0, 32, 4)], iscrowd=0)]
    for a in anns: with_box(a)
    imgs = [dict(id=k, file_name=f'{n}.jpg', width=W, height=H) for k, n in enumerate('abc', 1)]
    (root / 'annotations').mkdir(parents=True, exist_ok=True)
    (root / 'annotations/instances_train.json').write_text(json.dumps(dict(images=imgs, annotations=anns, categories=CATS)))
    (root / 'annotations/instances_val.json').write_text(json.dumps(dict(
        images=[dict(id=1, file_name='d.jpg', width=W, height=H)], categories=CATS,
        annotations=[with_box(dict(id=1, image_id=1, category_id=2, segmentation=[rect(4, 4, 20, 20)], iscrowd=0))])))
    return root


def coco_intended(crowd='class', overlap='later'):
    "The train ids of image a: the crowd first, then the car (60 px) and the person (70 px) over it, 16 px in both."
    t = np.zeros((H, W), np.int64)
    t[0:6, 20:24] = 2 if crowd == 'class' else 255
    car, person = (slice(3, 9), slice(2, 12)), (slice(5, 12), slice(8, 18))   # pycocotools: [x0, x1) x [y0, y1)
    order = [(car, 1), (person, 2)] if overlap == 'later' else [(person, 2), (car, 1)]   # smaller: painted last
    for where, v in order: t[where] = v
    t[14:20, 26:30] = 3
    return t


def test_coco_pixel_for_pixel(tmp_path):
    root = write_coco(tmp_path / 'coco')
    ds = FolderDataset(root)
    assert ds.export.name == 'COCO' and ds.info.class_names == ['background', 'car', 'person', 'sign']
    assert ds.classes['ids'] == [0, 2, 5, 9]                   # the class table shows the category ids
    assert ds.items[1][2] is None and ds.labeled_ids == ['a', 'c']   # b has no annotation: unlabeled
    assert torch.equal(ds[0]['label'], torch.from_numpy(coco_intended()))
    c = np.zeros((H, W), np.int64); c[0:4, :] = 1
    assert torch.equal(ds[2]['label'], torch.from_numpy(c))
    cached = ds.items[0][2]
    assert cached.is_file() and '.ael_cache' in cached.parts     # rasterised once, kept
    ig = FolderDataset(root, rules=Rules(crowd='ignore', overlap='smaller'))
    assert torch.equal(ig[0]['label'], torch.from_numpy(coco_intended('ignore', 'smaller')))
    assert ig.items[0][2] != cached                              # other rules, another cache file
    assert FolderDataset(root, 'val').labeled_ids == ['d']
    p = root / 'annotations/instances_train.json'; d = json.loads(p.read_text())   # the export again, the car moved
    d['annotations'][4]['segmentation'] = [rect(0, 20, 32, 24)]; p.write_text(json.dumps(d))
    c = np.zeros((H, W), np.int64); c[20:24, :] = 1
    assert torch.equal(FolderDataset(root)[2]['label'], torch.from_numpy(c))   # a new cache file: the stale one unread


def test_coco_check_says_what_it_found(tmp_path, capsys):
    root = write_coco(tmp_path / 'coco')
    assert ael_data(['check', str(root)]) == 0
    out = capsys.readouterr().out
    assert found(out) == ('found a COCO instances export (annotations/instances_train.json, annotations/instances_val.json): '
                      '3 categories as train ids (car 2->1, person 5->2, sign 9->3), uncovered pixels background 0, '
                      'polygons and RLE by pycocotools, crowd regions their category (data.crowd=class), overlaps: the '
                      'later instance wins (data.overlap=later); 3 of 4 images annotated, 1 without annotations unlabeled')
    out = out.splitlines()
    assert [l.split()[:2] for l in out[3:7]] == [['0', 'background'], ['2', 'car'], ['5', 'person'], ['9', 'sign']]
    assert f'{root}/annotations/instances_train.json: 16 px of 1 images are covered by instances of two classes: the later ' \
           'in the file wins (data.overlap=later; data.overlap=smaller lets the smaller win)' in out


def test_check_from_the_command_line(tmp_path):
    import subprocess, sys
    root = write_coco(tmp_path / 'coco')
    r = subprocess.run([sys.executable, '-c', 'import sys; from ael_nb.folder import ael_data; sys.exit(ael_data())', 'check',
                        str(root), 'data.overlap=smaller'], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert 'overlaps: the smaller instance wins (data.overlap=smaller)' in found(r.stdout)
    assert f'{root}: fit to train on (data.dataset=folder data.root={root})' in r.stdout


def test_coco_roboflow_group_category_dropped(tmp_path):
    "Roboflow's COCO export names the project as category 0, the supercategory of the others, used by no annotation."
    root = write_coco(tmp_path / 'coco')
    for f in ('train', 'val'):
        p = root / f'annotations/instances_{f}.json'; d = json.loads(p.read_text())
        d['categories'] = [dict(id=0, name='streets', supercategory='none')] + [dict(c, supercategory='streets') for c in CATS]
        p.write_text(json.dumps(d))
    r = check_folder(root)
    assert r['problems'] == [] and r['info'].class_names == ['background', 'car', 'person', 'sign']
    assert r['notes'][0] == (f"{root}/annotations/instances_train.json: category 'streets' (id 0) is the supercategory of "
                             'others and no annotation uses it: a group name, not a class')


def test_pycocotools_absent_one_line(tmp_path, monkeypatch):
    import builtins
    real = builtins.__import__
    def no_coco(name, *a, **k):
        if name.startswith('pycocotools'): raise ImportError(name)
        return real(name, *a, **k)
    root = write_coco(tmp_path / 'coco')
    monkeypatch.setattr(builtins, '__import__', no_coco)
    lines = check_folder(root)['problems']
    assert lines[0] == f"{root}/annotations/instances_train.json: reading COCO polygons and RLE needs pycocotools: pip install 'ael_nb[coco]'"


# ---- Pascal VOC, CVAT "Segmentation mask 1.1", labelme2voc ----

def voc_mask():
    m = np.zeros((H, W), np.uint8); m[2:10, 3:14] = 1; m[12:20, 16:28] = 15; m[12:20, 15] = 255; m[12:20, 28] = 255
    return m


def write_voc(root, kind='voc'):
    "kind 'voc': palette PNGs, VOC's 21 classes; 'cvat': RGB PNGs by labelmap.txt; 'labelme2voc': class_names.txt."
    root = Path(root)
    for n in 'abc': photo(root / 'JPEGImages' / f'{n}.jpg')
    sets = root / 'ImageSets/Segmentation'; sets.mkdir(parents=True)
    if kind == 'cvat':   # CVAT: labelmap.txt, RGB masks, one list default.txt and our val.txt
        (root / 'labelmap.txt').write_text('# label:color_rgb:parts:actions\nbackground:0,0,0::\ncar:250,50,83::\n'
                                           'person:51,221,255::\n')
        (sets / 'default.txt').write_text('a\nb\nc\n')
        m = np.zeros((H, W), np.uint8); m[2:10, 3:14] = 1; m[12:20, 16:28] = 2
        cols = np.array([(0, 0, 0), (250, 50, 83), (51, 221, 255)], np.uint8)
        (root / 'SegmentationClass').mkdir()
        for n in 'ac': Image.fromarray(cols[m]).save(root / f'SegmentationClass/{n}.png')
        (root / 'val.txt').write_text('c\n')
        return root, m
    d = root / ('SegmentationClassPNG' if kind == 'labelme2voc' else 'SegmentationClass'); d.mkdir()
    m = voc_mask()
    if kind == 'labelme2voc':
        (root / 'class_names.txt').write_text('_background_\ncar\n' + ''.join(f'c{k}\n' for k in range(2, 16)))
    for n in 'ac':
        im = Image.fromarray(m, mode='P'); im.putpalette([v for c in voc_palette(256) for v in c]); im.save(d / f'{n}.png')
    (sets / 'train.txt').write_text('a\nb\n'); (sets / 'val.txt').write_text('c\n')
    return root, m


@pytest.mark.parametrize('kind', ['voc', 'cvat', 'labelme2voc'])
def test_voc_family_pixel_for_pixel(kind, tmp_path):
    root, m = write_voc(tmp_path / kind, kind)
    ds = FolderDataset(root)
    assert ds.export.name == 'Pascal VOC' and ds.labeled_ids == ['a'] and ds.items[1][2] is None   # b: no mask, unlabeled
    assert torch.equal(ds[0]['label'], torch.from_numpy(m.astype(np.int64)))   # 255 border stays 255: ignored
    assert FolderDataset(root, 'val').ids == ['c']
    names = ds.info.class_names
    assert (names[:2], len(names)) == ((['background', 'aeroplane'], 21) if kind == 'voc' else
                                       (['background', 'car'], 3) if kind == 'cvat' else (['_background_', 'car'], 16))


def test_voc_check_line(tmp_path, capsys):
    root, _ = write_voc(tmp_path / 'voc')
    assert ael_data(['check', str(root)]) == 0
    assert found(capsys.readouterr().out) == (
        "found a Pascal VOC export (SegmentationClass/, JPEGImages/): VOC's 21 classes (no labelmap.txt or "
        'class_names.txt), a palette or grey mask as class ids, an RGB mask by its colours, 255 and (224, 224, 192) the '
        'ignored border; train 1 of 2 images with a mask, the rest unlabeled, val 1')


# ---- LabelMe ----

def labelme_json(root, name, shapes, image=None, data=False, size=(W, H)):
    root = Path(root)
    img = photo(root / f'{name}.jpg') if image is None else image
    d = dict(version='5.4.1', flags={}, shapes=shapes, imagePath=f'{name}.jpg', imageHeight=size[1], imageWidth=size[0],
             imageData=None)
    if data:
        buf = io.BytesIO(); Image.open(img).save(buf, 'PNG'); d['imageData'] = base64.b64encode(buf.getvalue()).decode()
        img.unlink(); d['imagePath'] = f'{name}.jpg'
    (root / f'{name}.json').write_text(json.dumps(d))
    return root / f'{name}.json'


def shape(label, points, kind): return dict(label=label, points=points, group_id=None, shape_type=kind, flags={})


def write_labelme(root):
    "a: a car polygon, a person rectangle over it, a sign circle; b.jpg without a JSON; c: shapes [] (explicitly empty),"
    "its image only as imageData; val/d: a car rectangle. Labels sorted: _background_ 0, car 1, person 2, sign 3."
    root = Path(root)
    labelme_json(root, 'a', [shape('car', [[2, 3], [12, 3], [12, 9], [2, 9]], 'polygon'),
                             shape('person', [[8, 5], [16, 12]], 'rectangle'), shape('sign', [[26, 17], [26, 20]], 'circle')])
    photo(root / 'b.jpg')
    labelme_json(root, 'c', [], data=True)
    labelme_json(root / 'val', 'd', [shape('car', [[1, 1], [10, 10]], 'rectangle')])
    return root


def test_labelme_pixel_for_pixel(tmp_path):
    root = write_labelme(tmp_path / 'lm')
    ds = FolderDataset(root)
    assert ds.export.name == 'LabelMe' and ds.info.class_names == ['_background_', 'car', 'person', 'sign']
    assert {i: lp is not None for i, _, lp in ds.items} == {'a': True, 'c': True, 'b': False}   # b: no JSON, unlabeled
    t = np.zeros((H, W), np.int64)
    t[3:10, 2:13] = 1; t[5:13, 8:17] = 2          # as labelme2voc draws them (PIL): both corners inside
    circle = Image.new('L', (W, H)); ImageDraw.Draw(circle).ellipse([23, 14, 29, 20], outline=1, fill=1)
    t[np.array(circle, bool)] = 3
    assert torch.equal(ds[0]['label'], torch.from_numpy(t))
    assert torch.equal(ds[ds.ids.index('c')]['label'], torch.zeros(H, W, dtype=torch.int64))   # explicitly empty: background
    assert ds[ds.ids.index('c')]['image'].shape == (3, H, W)                               # read from imageData
    un = FolderDataset(root, rules=Rules(empty='unlabeled'))
    assert un.labeled_ids == ['a']
    assert FolderDataset(root, 'val').labeled_ids == ['val/d']


def test_labelme_check_line(tmp_path, capsys):
    root = write_labelme(tmp_path / 'lm')
    assert ael_data(['check', str(root), 'data.empty=unlabeled']) == 0
    assert found(capsys.readouterr().out) == (
        'found a LabelMe export (3 JSONs): labels found in the JSONs, sorted (_background_=0, car=1, person=2, sign=3), '
        'shapes drawn as labelme2voc draws them, overlaps: the later shape wins (data.overlap=later); 2 of 4 images '
        'labeled, images without a JSON unlabeled, 1 JSONs explicitly empty read as unlabeled (data.empty=unlabeled)')


# ---- Roboflow "Semantic Segmentation Masks" ----

def write_roboflow(root, rgb_grey=False):
    "train/: a.jpg + a_mask.png, b.jpg without a mask; valid/: c.jpg + c_mask.png; _classes.csv in each."
    root = Path(root)
    m = np.zeros((H, W), np.uint8); m[2:10, 3:14] = 1; m[12:20, 16:28] = 2
    for d, names in (('train', 'ab'), ('valid', 'c')):
        (root / d).mkdir(parents=True)
        (root / d / '_classes.csv').write_text('Pixel Value, Class\n0, background\n1, crack\n2, spall\n')
        for n in names: photo(root / d / f'{n}.jpg')
        Image.fromarray(np.dstack([m] * 3) if rgb_grey else m).save(root / d / f'{names[0]}_mask.png')
    return root, m


@pytest.mark.parametrize('rgb_grey', [False, True])
def test_roboflow_pixel_for_pixel(rgb_grey, tmp_path):
    root, m = write_roboflow(tmp_path / 'rf', rgb_grey)
    ds = FolderDataset(root)
    assert ds.export.name == 'Roboflow' and ds.info.class_names == ['background', 'crack', 'spall']
    assert ds.labeled_ids == ['a'] and ds.ids == ['a', 'b']
    assert torch.equal(ds[0]['label'], torch.from_numpy(m.astype(np.int64)))
    r = check_folder(root)
    assert r['problems'] == []
    grey = f'{root}/train/a_mask.png: a 3-channel PNG with R = G = B, read as class ids (as OpenCV saves a grey mask)'
    assert any(n.startswith(grey) for n in r['notes']) == rgb_grey


# ---- Cityscapes layout ----

def write_cityscapes(root):
    "leftImg8bit/{train,val}/<city>/x_leftImg8bit.png, gtFine/.../x_gtFine_labelIds.png (one train image without gt)."
    root = Path(root)
    lab = np.full((H, W), 7, np.uint8); lab[:4] = 23; lab[10:16, 5:15] = 26; lab[-3:] = 1; lab[5:8, 20:25] = 24
    for split, city, stems in (('train', 'aachen', ['000000_000019', '000001_000019']), ('val', 'bremen', ['000000_000019'])):
        for k, s in enumerate(stems):
            photo(root / f'leftImg8bit/{split}/{city}/{city}_{s}_leftImg8bit.png')
            if k == 0:
                p = root / f'gtFine/{split}/{city}/{city}_{s}_gtFine_labelIds.png'; p.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(lab).save(p)
    return root, lab


def test_cityscapes_label_ids_to_train_ids(tmp_path):
    root, lab = write_cityscapes(tmp_path / 'cs')
    ds = FolderDataset(root)
    assert ds.export.name == 'Cityscapes' and len(ds.info.class_names) == 19
    assert ds.labeled_ids == ['aachen/aachen_000000_000019'] and len(ds) == 2
    t = np.vectorize(lambda v: CITYSCAPES_ID_TO_TRAINID.get(int(v), 255))(lab)
    assert torch.equal(ds[0]['label'], torch.from_numpy(t.astype(np.int64)))
    assert {int(v) for v in np.unique(t)} == {0, 10, 11, 13, 255}      # road, sky, person, car; ego vehicle ignored
    assert ds.classes['ids'][:3] == [7, 8, 11]                         # the table's id: the labelId of each train id


# ---- each mistake: one line naming the file ----

def _coco(r, f):
    p = r / 'annotations/instances_train.json'; d = json.loads(p.read_text()); f(d); p.write_text(json.dumps(d)); return p
def _undefined_category(r):
    p = _coco(r, lambda d: d['annotations'][0].update(category_id=4))
    return f"{p}: annotation 1 (image 'a.jpg') has category_id 4, which categories does not define (2, 5, 9)"
def _coco_polygon_outside(r):
    p = _coco(r, lambda d: d['annotations'][4].update(segmentation=[rect(0, 0, 40, 4)]))
    return f"{p}: annotation 5 (image 'c.jpg'): polygon point (40, 0) is outside the image (32x24)"
def _coco_image_missing(r):
    (r / 'images/c.jpg').unlink()
    return f'{r}/images/c.jpg: listed in instances_train.json (image id 3) but missing'
def _coco_mask_without_image(r):
    p = _coco(r, lambda d: d['annotations'].append(dict(id=9, image_id=7, category_id=2, segmentation=[rect(0, 0, 4, 4)])))
    return f'{p}: annotation 9 is of image id 7, which images does not list (a mask without its image)'
def _coco_size(r):
    p = _coco(r, lambda d: d['images'][2].update(width=30))
    return f"{p}: image 'c.jpg' is 32x24 in its file but 30x24 in images (image id 3)"
def _voc_listed_missing(r):
    (r / 'JPEGImages/b.jpg').unlink()
    return f'{r}/JPEGImages/b.jpg: listed in ImageSets/Segmentation/train.txt (line 2) but missing'
def _voc_mask_without_image(r):
    (r / 'SegmentationClass/a.png').rename(r / 'SegmentationClass/z.png'); (r / 'SegmentationClass/a.png').write_bytes(
        (r / 'SegmentationClass/z.png').read_bytes())
    return f'{r}/SegmentationClass/z.png: mask without an image (no {r}/JPEGImages/z.jpg)'
def _cvat_unknown_colour(r):
    m = np.array(Image.open(r / 'SegmentationClass/a.png')); m[0, :5] = (12, 200, 7); Image.fromarray(m).save(r / 'SegmentationClass/a.png')
    return f'{r}/SegmentationClass/a.png: colours (12, 200, 7) (5 px) are no colour of labelmap.txt'
def _labelme_image_path(r):
    p = r / 'a.json'; d = json.loads(p.read_text()); d['imagePath'] = 'A_0001.jpg'; p.write_text(json.dumps(d))
    return f"{p}: imagePath 'A_0001.jpg' names no file and the JSON holds no imageData; the image beside it is a.jpg: set imagePath to 'a.jpg'"
def _labelme_size(r):
    p = r / 'a.json'; d = json.loads(p.read_text()); d['imageHeight'] = 20; p.write_text(json.dumps(d))
    return f'{p}: imageWidth x imageHeight 32x20 disagrees with the image a.jpg (32x24)'
def _labelme_outside(r):
    p = r / 'a.json'; d = json.loads(p.read_text()); d['shapes'][1]['points'][1] = [16, 30]; p.write_text(json.dumps(d))
    return f"{p}: shape 'person': point (16, 30) is outside the image (32x24)"
def _labelme_undefined_label(r):
    (r / 'labels.txt').write_text('__ignore__\n_background_\ncar\nperson\n')
    return f"{r / 'a.json'}: label 'sign' is not in labels.txt: add it there or rename the shape"
def _roboflow_mask_without_image(r):
    (r / 'train/a.jpg').rename(r / 'train/b2.jpg'); (r / 'train/b2.jpg').rename(r / 'train/a.jpg')
    Image.open(r / 'train/a_mask.png').save(r / 'train/z_mask.png')
    return f'{r}/train/z_mask.png: mask without its image (no {r}/train/z.jpg beside it)'
def _roboflow_value(r):
    m = np.array(Image.open(r / 'train/a_mask.png')); m[0, :3] = 7; Image.fromarray(m).save(r / 'train/a_mask.png')
    return f'{r}/train/a_mask.png: values 7 (3 px) are no pixel value of _classes.csv (0..2)'
def _cityscapes_mask_without_image(r):
    g = r / 'gtFine/train/aachen'
    Image.open(next(g.glob('*labelIds.png'))).save(g / 'aachen_000009_000019_gtFine_labelIds.png')
    return f'{g}/aachen_000009_000019_gtFine_labelIds.png: mask without its image (no {r}/leftImg8bit/train/aachen/aachen_000009_000019_leftImg8bit.png)'

MISTAKES = {
    'coco_undefined_category': (write_coco, _undefined_category), 'coco_polygon_outside': (write_coco, _coco_polygon_outside),
    'coco_image_missing': (write_coco, _coco_image_missing), 'coco_mask_without_image': (write_coco, _coco_mask_without_image),
    'coco_size': (write_coco, _coco_size),
    'voc_listed_missing': (lambda r: write_voc(r)[0], _voc_listed_missing),
    'voc_mask_without_image': (lambda r: write_voc(r)[0], _voc_mask_without_image),
    'cvat_unknown_colour': (lambda r: write_voc(r, 'cvat')[0], _cvat_unknown_colour),
    'labelme_image_path': (write_labelme, _labelme_image_path), 'labelme_size': (write_labelme, _labelme_size),
    'labelme_polygon_outside': (write_labelme, _labelme_outside), 'labelme_undefined_label': (write_labelme, _labelme_undefined_label),
    'roboflow_mask_without_image': (lambda r: write_roboflow(r)[0], _roboflow_mask_without_image),
    'roboflow_value': (lambda r: write_roboflow(r)[0], _roboflow_value),
    'cityscapes_mask_without_image': (lambda r: write_cityscapes(r)[0], _cityscapes_mask_without_image)}


@pytest.mark.parametrize('case', MISTAKES)
def test_mistake_one_line_check_1_train_2(case, tmp_path, capsys):
    write, spoil = MISTAKES[case]
    root = tmp_path / 'x'; write(root)
    line = spoil(root)
    assert check_folder(root)['problems'] == [line]
    assert ael_data(['check', str(root)]) == 1
    assert capsys.readouterr().err.splitlines() == [line, f'ael-data: 1 bad inputs in {root}; ael-train refuses this folder until they are fixed']
    rc = ael_train(['--preset', 'folder', f'data.root={root}', '--out', str(tmp_path / 'run'), *TRAIN])
    assert rc == 2 and capsys.readouterr().err.splitlines() == [f'ael-train: error: {line}']
    assert not (tmp_path / 'run' / 'latest.pth').exists()


# ---- each family trains a tiny run from the command line ----

FAMILIES = {'coco': write_coco, 'voc': lambda r: write_voc(r)[0], 'labelme': write_labelme,
            'roboflow': lambda r: write_roboflow(r)[0], 'cityscapes': lambda r: write_cityscapes(r)[0]}


@pytest.mark.slow
@pytest.mark.parametrize('family', FAMILIES)
def test_family_trains_tiny_run(family, tmp_path, capsys):
    root = tmp_path / family; FAMILIES[family](root)
    out = tmp_path / 'run'
    assert ael_train(['--preset', 'folder', f'data.root={root}', '--out', str(out), *TRAIN]) == 0, capsys.readouterr().err
    assert (out / 'latest.pth').is_file() and (out / 'best.pth').is_file()
    assert f'folder {root}: tail classes' in capsys.readouterr().out

"Messy folders (issue 39): each way a user's folder goes wrong, built here by PIL and numpy, with the exact line the kit prints."
import json, struct, zlib
from pathlib import Path
import numpy as np
import pytest
from PIL import Image
from ael_nb.config import read_yaml
from ael_nb.folder import FolderDataset, ael_data, check_folder
from ael_nb.manifests import load_manifest
from ael_nb.cli import ael_train
from test_folder import COLOURS, TRAIN, write_folder

H, W = 24, 32
CLEAN = [('0', 'c0', '2568', 'head'), ('1', 'c1', '192', 'head'), ('2', 'c2', '184', 'tail')]   # 4 labeled images of write_folder


def ids_mask():
    "The mask of write_folder: c0 ground, a c1 box, a c2 strip, the last row ignored (255)."
    lab = np.zeros((H, W), np.uint8); lab[3:9, 4:12] = 1; lab[:, -2:] = 2; lab[-1] = 255
    return lab


def colour_mask():
    "`ids_mask` as colours of classes.yaml, the ignored row black."
    rgb = np.array(COLOURS + [(0, 0, 0)], np.uint8)[np.minimum(ids_mask(), 3)]
    return rgb


def with_ignore_colour(root):
    with open(root / 'classes.yaml', 'a') as f: f.write('ignore_color: [0, 0, 0]\n')


def png16_rgb(arr, path):
    "A 16-bit RGB PNG (PIL writes none): `arr` uint16 [H,W,3]."
    h, w, _ = arr.shape
    chunk = lambda t, d: struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    raw = b''.join(b'\0' + arr[y].astype('>u2').tobytes() for y in range(h))
    path.write_bytes(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 16, 2, 0, 0, 0)) +
                     chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))


# ---- errors: `ael-data check` prints the line and exits 1, `ael-train` refuses with it before step 1 (exit 2) ----

def _val_without_mask(r):
    (r / 'val/labels/town0/000.png').unlink()
    return 'val/images/town0/000.jpg', f'val image without a mask (no {r}/val/labels/town0/000.png)'
def _jpeg_mask(r):
    (r / 'labels/town0/000.png').unlink(); Image.fromarray(ids_mask()).save(r / 'labels/town0/000.jpg', quality=95)
    return 'labels/town0/000.jpg', 'mask saved as .jpg, a lossy format whose edges take values of no class: save it as PNG'
def _alpha_used(r):              # transparent where nothing is labeled: the pixels would take the class of the colour stored
    with_ignore_colour(r)
    Image.fromarray(np.dstack([colour_mask(), np.where(ids_mask() == 255, 0, 255).astype(np.uint8)])).save(r / 'labels/town1/001.png')
    return 'labels/town1/001.png', 'mask has an alpha channel that is used (32 px not opaque): save it without alpha, unlabeled pixels as ignore 255 or ignore_color'
def _palette_disagrees(r):
    im = Image.fromarray(ids_mask(), mode='P'); im.putpalette([128, 64, 128, 0, 0, 200, 220, 20, 60] + [0] * 759); im.save(r / 'labels/town0/002.png')
    return 'labels/town0/002.png', ("palette colours disagree with classes.yaml: index 1 is (0, 0, 200) in the PNG, class 'c1' is (0, 0, 142); "
                                    'give the PNG the palette of classes.yaml, or the file the colours of the PNG')
def _grey16_image(r):            # PIL's RGB of it: every value above 255 white
    (r / 'images/town1/003.jpg').unlink(); Image.fromarray(np.full((H, W), 40000, np.uint16)).save(r / 'images/town1/003.png')
    return 'images/town1/003.png', 'image mode I;16 holds values above 255, which RGB would clip to white: save it as 8-bit RGB or grey'
def _float_image(r):
    (r / 'images/town1/005.jpg').unlink(); Image.fromarray(np.full((H, W), 0.5, np.float32)).save(r / 'images/town1/005.tif')
    return 'images/town1/005.tif', 'image mode F holds values above 255, which RGB would clip to white: save it as 8-bit RGB or grey'
def _value_in_gap(r):            # ids 0, 1, 3: a 2 left in one mask
    (r / 'classes.yaml').write_text('classes: [c0, c1, null, c2]\n')
    for p in (r / 'labels').rglob('*.png'): m = np.array(Image.open(p)); m[m == 2] = 3; Image.fromarray(m).save(p)
    for p in (r / 'val/labels').rglob('*.png'): m = np.array(Image.open(p)); m[m == 2] = 3; Image.fromarray(m).save(p)
    Image.fromarray(ids_mask()).save(r / 'labels/town1/001.png')
    return 'labels/town1/001.png', 'label values 2 (46 px) are not class ids (0..1, 3) nor the ignore value 255'
def _yaml_tag(r):
    (r / 'classes.yaml').write_text('classes: !!python/object/apply:os.system ["echo owned"]\n')
    return 'classes.yaml', "not valid YAML: could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system' at line 1 column 10"
def _yaml_key_twice(r):          # YAML would keep the second name
    (r / 'classes.yaml').write_text('classes:\n  - {name: c0, name: c9}\n  - c1\n  - c2\n')
    return 'classes.yaml', 'classes[0].name is set twice, at lines 2 and 2: keep one'
def _yaml_syntax(r):
    (r / 'classes.yaml').write_text('classes: [c0, c1, c2\n')
    return 'classes.yaml', "not valid YAML: expected ',' or ']', but got '<stream end>' at line 2 column 1"


def _grey_rgb_bad_value(r):      # read as ids, the values of no class named as such
    m = ids_mask(); m[0, :3] = 7; Image.fromarray(np.dstack([m] * 3)).save(r / 'labels/town0/002.png')
    return 'labels/town0/002.png', ('a 3-channel grey PNG (R = G = B) read as class ids: label values 7 (3 px) are not class '
                                    'ids (0..2) nor the ignore value 255')


def binary_folder(r, fg=255):
    "write_folder's masks as a binary tool saves them: background 0, c1's box `fg` (48 px a mask), nothing ignored."
    (r / 'classes.yaml').write_text('classes: [background, crack]\n')
    for p in [*(r / 'labels').rglob('*.png'), *(r / 'val/labels').rglob('*.png')]:
        Image.fromarray(np.where(ids_mask() == 1, fg, 0).astype(np.uint8)).save(p)

BINARY_FIX = '{classes: [background, {name: crack, id: 255}], ignore: none}'
def _binary_0_255(r):            # every crack pixel would be ignored: crack trains at IoU 0 (UniMatch V2 #18)
    binary_folder(r)
    return 'classes.yaml', ("class 'crack' (id 1) has no labeled pixel, and the masks hold 192 px of the ignore value 255, as a binary "
                            f"mask saved 0/255 holds its foreground; if those pixels are crack, write classes.yaml as {BINARY_FIX}")
def suffixed_masks(r, suffix='_mask'):
    for p in sorted((r / 'labels').rglob('*.png')): p.rename(p.with_name(p.stem + suffix + '.png'))
def _mask_suffix(r):             # one line for the 4 masks, not a line each
    suffixed_masks(r)
    return 'labels', ('the 4 labels are named as their image plus \'_mask\' (town0/000_mask.png for town0/000.jpg), so none is found: '
                      'add "mask_suffix: _mask" to classes.yaml, or rename them without \'_mask\'')

ERRORS = dict(val_without_mask=_val_without_mask, jpeg_mask=_jpeg_mask, alpha_used=_alpha_used, palette_disagrees=_palette_disagrees,
              grey16_image=_grey16_image, float_image=_float_image, value_in_gap=_value_in_gap, yaml_tag=_yaml_tag,
              yaml_key_twice=_yaml_key_twice, yaml_syntax=_yaml_syntax, binary_0_255=_binary_0_255, mask_suffix=_mask_suffix,
              grey_rgb_bad_value=_grey_rgb_bad_value)


@pytest.mark.parametrize('case', ERRORS)
def test_error_one_line_check_1_train_2(case, tmp_path, capsys):
    root = write_folder(tmp_path / 'data')
    file, problem = ERRORS[case](root)
    line = f'{root / file}: {problem}'
    assert check_folder(root)['problems'] == [line]
    assert ael_data(['check', str(root)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [line, f'ael-data: 1 bad inputs in {root}; ael-train refuses this folder until they are fixed']
    out = tmp_path / 'run'
    assert ael_train(['--preset', 'folder', f'data.root={root}', '--out', str(out), *TRAIN]) == 2
    assert capsys.readouterr().err.splitlines() == [f'ael-train: error: {line}']
    assert not (out / 'latest.pth').exists() and not (out / 'config.yaml').exists()
    assert not list(tmp_path.glob('*.png')) and not list(Path.cwd().glob('class_histogram*.png'))   # no histogram unasked


def test_val_without_mask_fixed_trains_in_the_same_folder(tmp_path, capsys):
    "The refused run leaves nothing that blocks the corrected rerun (no run.overwrite needed)."
    root = write_folder(tmp_path / 'data')
    _val_without_mask(root)
    args = ['--preset', 'folder', f'data.root={root}', '--out', str(tmp_path / 'run'), *TRAIN]
    assert ael_train(args) == 2
    Image.fromarray(ids_mask()).save(root / 'val/labels/town0/000.png')
    assert ael_train(args) == 0, capsys.readouterr().err
    assert (tmp_path / 'run' / 'latest.pth').is_file()


# ---- read right: `ael-data check` exits 0 with the right class table (and a note where the user should look) ----

def _upper_case_suffix(r):
    (r / 'labels/town0/000.png').rename(r / 'labels/town0/000.PNG'); return CLEAN, []
def _rgba_opaque(r):
    with_ignore_colour(r)
    Image.fromarray(np.dstack([colour_mask(), np.full((H, W), 255, np.uint8)])).save(r / 'labels/town1/001.png'); return CLEAN, []
def _grey_alpha_opaque(r):       # a grey mask with an alpha channel of 255 everywhere: its ids
    Image.fromarray(np.dstack([ids_mask(), np.full((H, W), 255, np.uint8)]), mode='LA').save(r / 'labels/town0/002.png'); return CLEAN, []
def _tiff_mask(r):               # lossless, so read like a PNG
    (r / 'labels/town1/003.png').unlink(); Image.fromarray(ids_mask()).save(r / 'labels/town1/003.tif'); return CLEAN, []
def _palette_agrees(r):          # read by index, and the palette's colours are the classes'
    im = Image.fromarray(ids_mask(), mode='P'); im.putpalette([c for rgb in COLOURS for c in rgb] + [0] * 759); im.save(r / 'labels/town0/002.png')
    return CLEAN, []
def _palette_of_greys(r):        # a grey image turned palette: ids, no colours to compare
    Image.fromarray(ids_mask()).convert('P').save(r / 'labels/town0/002.png'); return CLEAN, []
def _rgb16_image(r):             # PIL reads it as 8 bits (the high byte): nothing clipped
    (r / 'images/town1/003.jpg').unlink(); png16_rgb(np.full((H, W, 3), 40000, np.uint16), r / 'images/town1/003.png'); return CLEAN, []
def _exif_turned(r):             # a phone photo stored sideways (orientation 6), its mask drawn on the upright image
    ex = Image.Exif(); ex[0x0112] = 6
    Image.fromarray(np.zeros((W, H, 3), np.uint8)).save(r / 'images/town0/000.jpg', exif=ex)
    return CLEAN, [f'{r}/images/town0/000.jpg: EXIF orientation 6, read turned upright (as PIL exif_transpose and OpenCV do): '
                   f'check that {r}/labels/town0/000.png is drawn on the upright image']
def _ids_with_gaps(r):           # ids 0, 1, 3 in the masks and a class 5 that no mask has
    (r / 'classes.yaml').write_text('classes:\n' + ''.join(f'  - {{name: c{k}, color: {list(c)}, id: {v}}}\n' for k, c, v in
                                                        zip(range(3), COLOURS, (0, 1, 3))) + '  - {name: c9, color: [9, 9, 9], id: 5}\n')
    for p in [*(r / 'labels').rglob('*.png'), *(r / 'val/labels').rglob('*.png')]:
        m = np.array(Image.open(p)); m[m == 2] = 3; Image.fromarray(m).save(p)
    return ([('0', 'c0', '2568', 'head'), ('1', 'c1', '192', 'head'), ('3', 'c2', '184', 'tail'), ('5', 'c9', '0', 'head')],
            [f"{r}/classes.yaml: class 'c9' (id 5) has no labeled pixel in {r}/labels: nothing teaches it, "
             'and it is a tail class only if classes.yaml says so'])
def _null_gap(r):                # `- null`: a gap, no class named None
    (r / 'classes.yaml').write_text('classes: [c0, c1, null, c2]\n')
    for p in [*(r / 'labels').rglob('*.png'), *(r / 'val/labels').rglob('*.png')]:
        m = np.array(Image.open(p)); m[m == 2] = 3; Image.fromarray(m).save(p)
    return [('0', 'c0', '2568', 'head'), ('1', 'c1', '192', 'head'), ('3', 'c2', '184', 'tail')], []
def _csv_header(r):
    (r / 'classes.yaml').unlink(); (r / 'classes.csv').write_text('name,r,g,b\n' + ''.join(f'c{k},{",".join(map(str, c))}\n' for k, c in enumerate(COLOURS)))
    return CLEAN, []
def _csv_without_header(r):      # its first row is a class, not a header
    (r / 'classes.yaml').unlink(); (r / 'classes.csv').write_text(''.join(f'c{k},{",".join(map(str, c))}\n' for k, c in enumerate(COLOURS)))
    return CLEAN, []

def _grey_rgb_ids(r):           # ids saved as a 3-channel grey PNG (R = G = B), as OpenCV's imwrite of a grey mask
    for p in [*(r / 'labels').rglob('*.png'), *(r / 'val/labels').rglob('*.png')]:
        Image.fromarray(np.dstack([np.array(Image.open(p))] * 3)).save(p)
    return CLEAN, []

def _binary_fixed(r):            # the classes.yaml the binary line gives: the foreground counted as crack
    binary_folder(r)
    line = check_folder(r)['problems'][0]
    (r / 'classes.yaml').write_text(line.split('write classes.yaml as ', 1)[1] + '\n')
    return [('0', 'background', '2880', 'head'), ('255', 'crack', '192', 'tail')], []
def _binary_0_1(r):
    binary_folder(r, fg=1); return [('0', 'background', '2880', 'head'), ('1', 'crack', '192', 'tail')], []
def _mask_suffix_given(r):
    suffixed_masks(r)
    with open(r / 'classes.yaml', 'a') as f: f.write('mask_suffix: _mask\n')
    return CLEAN, []
def _nested_subfolders(r):       # images/de/town0/000.jpg and labels/de/town0/000.png: ids keep the whole path
    for d in ('images', 'labels'):
        (r / d).rename(r / 'tmp'); (r / d).mkdir(); (r / 'tmp').rename(r / d / 'de')
    return CLEAN, []

READ_RIGHT = dict(upper_case_suffix=_upper_case_suffix, rgba_opaque=_rgba_opaque, grey_alpha_opaque=_grey_alpha_opaque, tiff_mask=_tiff_mask, palette_agrees=_palette_agrees,
                  palette_of_greys=_palette_of_greys, rgb16_image=_rgb16_image, exif_turned=_exif_turned,
                  ids_with_gaps=_ids_with_gaps, null_gap=_null_gap, csv_header=_csv_header, csv_without_header=_csv_without_header,
                  binary_fixed=_binary_fixed, binary_0_1=_binary_0_1, mask_suffix_given=_mask_suffix_given,
                  nested_subfolders=_nested_subfolders, grey_rgb_ids=_grey_rgb_ids)


@pytest.mark.parametrize('case', READ_RIGHT)
def test_read_right_check_0_with_its_table(case, tmp_path, capsys):
    root = write_folder(tmp_path / 'data')
    table, notes = READ_RIGHT[case](root)
    assert ael_data(['check', str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    head = out.index(next(l for l in out if l.split() == ['id', 'class', 'pixels', 'share', 'group']))
    rows = [tuple(l.split()[k] for k in (0, 1, 2, 4)) for l in out[head + 1:head + 1 + len(table)]]
    assert rows == table and out[head + 1 + len(table):] == notes + [f'{root}: fit to train on (data.dataset=folder data.root={root})']
    assert not list(tmp_path.glob('*.png'))


def test_exif_image_is_read_upright(tmp_path):
    "Orientation 3 (turned 180 degrees as stored): the white row stored at the bottom is read at the top, where its mask has it."
    root = write_folder(tmp_path / 'data')
    img = np.zeros((H, W, 3), np.uint8); img[-1] = 255
    ex = Image.Exif(); ex[0x0112] = 3
    Image.fromarray(img).save(root / 'images/town0/000.png', exif=ex); (root / 'images/town0/000.jpg').unlink()
    assert FolderDataset(root)[0]['image'][:, 0].min().item() == 255
    assert check_folder(root)['notes'][0].startswith(f'{root}/images/town0/000.png: EXIF orientation 3, read turned upright')


def test_histogram_where_asked(tmp_path, monkeypatch, capsys):
    root = write_folder(tmp_path / 'data')
    monkeypatch.chdir(tmp_path)
    assert ael_data(['check', str(root)]) == 0 and not list(tmp_path.glob('*.png'))   # nothing in the cwd
    assert ael_data(['check', str(root), '--plot', str(tmp_path / 'plots/h.png')]) == 0 and (tmp_path / 'plots/h.png').stat().st_size > 0
    assert ael_data(['check', str(root), '--report', str(tmp_path / 'r/check.txt')]) == 0
    text = (tmp_path / 'r/check.txt').read_text()
    assert (tmp_path / 'r/check.png').is_file() and f'class histogram: {tmp_path}/r/check.png' in text and 'fit to train on' in text


# ---- every YAML the kit reads: a tag, a key set twice, bad syntax: one line naming the file ----

YAML = {'tag': ('optim:\n  lr: !!python/object/apply:os.system ["echo owned"]\n',
                "not valid YAML: could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system' at line 2 column 7"),
        'key_twice': ('optim:\n  lr: 0.1\n  lr: 0.2\n', 'optim.lr is set twice, at lines 2 and 3: keep one'),
        'syntax': ('optim: {lr: 0.1\n', "not valid YAML: expected ',' or '}', but got '<stream end>' at line 2 column 1")}


@pytest.mark.parametrize('case', YAML)
def test_config_yaml_one_line(case, tmp_path, capsys):
    text, problem = YAML[case]
    (tmp_path / 'bad.yaml').write_text(text)
    with pytest.raises(ValueError) as e: read_yaml(tmp_path / 'bad.yaml')
    assert str(e.value) == f'{tmp_path}/bad.yaml: {problem}'
    assert ael_train(['--preset', 'folder', '--config', str(tmp_path / 'bad.yaml'), '--out', str(tmp_path / 'run')]) == 2
    assert capsys.readouterr().err.splitlines() == [f'ael-train: error: {tmp_path}/bad.yaml: {problem}']


def test_manifest_key_twice_one_line(tmp_path):
    "A manifest is JSON, which keeps the last of two equal keys without a word; the kit refuses it."
    (tmp_path / 'm.json').write_text(json.dumps(dict(dataset='folder', split='train', labeled=['a'], unlabeled=['b']))[:-1] + ', "labeled": ["b"]}')
    with pytest.raises(ValueError) as e: load_manifest(tmp_path / 'm.json')
    assert str(e.value) == f"{tmp_path}/m.json: 'labeled' set twice in one object: keep one"


def test_exif_unlabeled_image_listed_without_a_mask(tmp_path):
    root = write_folder(tmp_path / 'data')                 # images 004 and 005 have no mask
    ex = Image.Exif(); ex[0x0112] = 8
    Image.fromarray(np.zeros((W, H, 3), np.uint8)).save(root / 'images/town0/004.jpg', exif=ex)
    assert check_folder(root)['notes'] == [f'{root}/images/town0/004.jpg: EXIF orientation 8, read turned upright (as PIL exif_transpose and OpenCV do)']


def test_val_without_mask_refused_without_the_check(tmp_path, capsys):
    "`data.check=false` skips reading every file, not the listing: a val image without a mask is still refused before step 1."
    root = write_folder(tmp_path / 'data')
    file, problem = _val_without_mask(root)
    out = tmp_path / 'run'
    assert ael_train(['--preset', 'folder', f'data.root={root}', '--out', str(out), *TRAIN, 'data.check=false']) == 2
    assert capsys.readouterr().err.splitlines() == [f'ael-train: error: {root / file}: {problem}']
    assert not (out / 'latest.pth').exists() and not (out / 'config.yaml').exists()


@pytest.mark.parametrize('suffix', ['_label', '_gt', '-mask'])
def test_any_mask_suffix_named_once(suffix, tmp_path):
    root = write_folder(tmp_path / 'data')
    suffixed_masks(root, suffix)
    assert check_folder(root)['problems'] == [
        f'{root}/labels: the 4 labels are named as their image plus {suffix!r} (town0/000{suffix}.png for town0/000.jpg), so none is '
        f'found: add "mask_suffix: {suffix}" to classes.yaml, or rename them without {suffix!r}']


def test_exif6_photo_with_upright_mask_aligns_pixels(tmp_path):
    "A phone photo stored sideways (orientation 6), its mask drawn on the upright photo: bright exactly where the mask has c1."
    root = write_folder(tmp_path / 'data')
    upright = np.where((ids_mask() == 1)[..., None], 255, 0).astype(np.uint8).repeat(3, 2)
    ex = Image.Exif(); ex[0x0112] = 6                               # stored turned 90 degrees: shown turned back clockwise
    Image.fromarray(np.ascontiguousarray(np.rot90(upright, 1))).save(root / 'images/town0/000.jpg', exif=ex, quality=95)
    s = FolderDataset(root)[0]
    assert s['id'] == 'town0/000' and tuple(s['image'].shape) == (3, H, W)
    assert ((s['image'][0] > 127) == (s['label'] == 1)).all()
    assert check_folder(root)['problems'] == []


def test_data_root_at_a_file(tmp_path, capsys):
    root = write_folder(tmp_path / 'data')
    line = f'{root}/classes.yaml: folder dataset root is a file, not a folder: give the folder that holds it ({root})'
    assert ael_data(['check', str(root / 'classes.yaml')]) == 1
    assert capsys.readouterr().err.splitlines()[0] == line
    assert ael_train(['--preset', 'folder', f'data.root={root}/classes.yaml', '--out', str(tmp_path / 'run'), *TRAIN]) == 2
    assert capsys.readouterr().err.splitlines() == [f'ael-train: error: {line}']


def test_fully_labeled_folder_names_data_fraction(tmp_path, capsys):
    "Every image has a mask: AEL has no unlabeled image at the folder preset's data.fraction=1; the error says how to make some."
    root = write_folder(tmp_path / 'data', n=4, labeled=4)
    assert ael_train(['--preset', 'folder', f'data.root={root}', '--out', str(tmp_path / 'run'), *TRAIN]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "ael-train: error: method 'ael' needs unlabeled images; the manifest has none: every training image keeps its mask at "
        "data.fraction=1; data.fraction=1/8 keeps 1 mask in 8 and makes the rest unlabeled (or train --method supervised)"]
    assert not (tmp_path / 'run' / 'config.yaml').exists()
    assert ael_train(['--preset', 'folder', f'data.root={root}', '--out', str(tmp_path / 'run'), *TRAIN, 'data.fraction=1/8']) == 0
    assert json.loads((tmp_path / 'run' / 'manifest.json').read_text())['unlabeled'] == 3

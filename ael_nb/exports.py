
from __future__ import annotations
import base64, csv, hashlib, io, json, os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
import numpy as np
import torch
from PIL import Image, ImageDraw
from .core import IGNORE_INDEX, DataError
from .datasets import (CITYSCAPES_ID_TO_TRAINID, CITYSCAPES_INFO, IMAGE_EXTS, VOC_INFO, image_files, make_lut,
                       read_label, voc_palette, _ranges)



@dataclass(frozen=True)
class Rules:
    "How an export is read where a reading is a choice (`data.overlap`, `data.crowd`, `data.empty`)."
    overlap: str = 'later'        # overlapping instances: the later in the file wins, or 'smaller' (the smaller area)
    crowd: str = 'class'          # COCO iscrowd regions: their category, or 'ignore' (255)
    empty: str = 'background'     # an annotation that is explicitly empty: all background, or 'unlabeled'

    def __post_init__(self):
        for k, ok in (('overlap', ('later', 'smaller')), ('crowd', ('class', 'ignore')),
                      ('empty', ('background', 'unlabeled'))):
            if getattr(self, k) not in ok: raise ValueError(f'data.{k}={getattr(self, k)!r}: one of {", ".join(ok)}')

    @property
    def key(self) -> str: return f'{self.overlap}-{self.crowd}-{self.empty}'



def visible_files(d: Path, pattern: str = '*') -> list[Path]:
    "Files under `d` matching `pattern`, sorted, none under a hidden folder (the cache `.ael_cache` among them)."
    d = Path(d)
    return sorted(p for p in d.rglob(pattern) if p.is_file() and not any(s.startswith('.') for s in p.relative_to(d).parts))

def image_ids(d: Path) -> dict:
    "{id: image} under `d` (`image_files`) less any under a hidden folder."
    return {i: p for i, p in (image_files(d) if Path(d).is_dir() else {}).items()
            if not any(s.startswith('.') for s in PurePosixPath(i).parts)}

def stamp_key(*parts) -> str:
    "A short hash of `parts` (paths are stamped by size and modification time)."
    h = hashlib.sha1()
    for p in parts:
        s = p.stat() if isinstance(p, Path) else None
        h.update(repr((str(p), s.st_size, s.st_mtime_ns) if s else p).encode())
    return h.hexdigest()[:12]

def cache_dir(root: Path) -> Path:
    "Where rasterised masks of the export at `root` are kept: `$AEL_CACHE/<hash of root>`, else `ROOT/.ael_cache`."
    env = os.environ.get('AEL_CACHE')
    return Path(env)/hashlib.sha1(str(Path(root).resolve()).encode()).hexdigest()[:12] if env else Path(root)/'.ael_cache'

def save_ids(ids: np.ndarray, path: Path) -> Path:
    "Write train ids as a PNG (8-bit, or 16-bit past 255 classes) atomically: a reader never sees half a file."
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f'.{path.name}.{os.getpid()}.tmp')
    im = Image.fromarray(ids.astype(np.uint8 if ids.max(initial=0) <= 255 else np.uint16))
    im.save(tmp, format='PNG'); os.replace(tmp, path)
    return path



def grey_ids(arr: np.ndarray) -> np.ndarray|None:
    "Channel 0 of a 3-channel PNG whose channels are equal (ids saved as RGB, as OpenCV writes a grey mask), else None."
    if arr.ndim == 3 and arr.shape[2] == 3 and (arr[..., 0] == arr[..., 1]).all() and (arr[..., 0] == arr[..., 2]).all():
        return arr[..., 0]
    return None

def _counted(vals, counts) -> str:
    return ', '.join(f'{v} ({c} px)' for v, c in list(zip(vals, counts))[:8]) + (', ...' if len(vals) > 8 else '')

def lut_ids(raw: np.ndarray, table: dict, path, what: str) -> torch.Tensor:
    "Train ids of raw values by `table` {value: train id}; values outside it a `DataError` saying they are no `what`."
    lut = make_lut(table, size=max(256, max(table) + 1, int(raw.max(initial=0)) + 1))
    bad = lut[raw] < 0
    if bad.any():
        v, n = np.unique(raw[bad], return_counts=True)
        raise DataError(path, f'values {_counted(v, n)} are {what}')
    return torch.from_numpy(lut[raw])

def colour_ids(rgb: np.ndarray, table: dict, path, what: str) -> torch.Tensor:
    "Train ids of an RGB mask by `table` {(r, g, b): train id}; other colours a `DataError` saying they are no `what`."
    keys, inv, counts = np.unique(rgb.reshape(-1, 3), axis=0, return_inverse=True, return_counts=True)
    bad = [(tuple(int(x) for x in c), n) for c, n in zip(keys, counts) if tuple(int(x) for x in c) not in table]
    if bad: raise DataError(path, f'colours {_counted(*zip(*bad))} are {what}')
    return torch.tensor([table[tuple(int(x) for x in c)] for c in keys])[torch.from_numpy(inv.reshape(rgb.shape[:2]))]

def read_mask(path: Path) -> np.ndarray:
    "The pixels of a mask file as stored: ids `[H,W]` (P, L, I) or colours `[H,W,3]` (RGB; opaque RGBA)."
    if not path.is_file(): raise DataError(path, 'mask file is missing')
    try:
        with Image.open(path) as im:
            if im.mode == 'RGBA' and np.array(im.getchannel('A')).min() == 255: im = im.convert('RGB')
            if im.mode == 'RGB': return np.array(im)
    except OSError as e: raise DataError(path, f'cannot read mask ({type(e).__name__}: {e})') from None
    return read_label(path)



def classes_of(names, colors=None, ids=None, path=None, files=()) -> dict:
    "The classes of an export in the form `read_classes` gives (train id k is `names[k]`; `ids`: the tool's value)."
    colors = [tuple(c) for c in colors] if colors is not None else voc_palette(len(names))
    return dict(names=list(names), ids=list(range(len(names)) if ids is None else ids), colors=colors,
                given=[True] * len(names), ignore=IGNORE_INDEX, ignore_color=None, tail=None, mask_suffix='',
                path=Path(path) if path else None, files=list(files))

class Export:
    "A labelling tool's export read in place: its classes, each split's `(id, image, mask)`, and how a mask decodes."
    name = ''
    def __init__(self, root: Path, rules: Rules = Rules()):
        self.root, self.rules = Path(root), rules
        self.listing: dict[str, list[str]] = {}    # split -> lines of what listing it found wrong
        self.notes: list[str] = []                 # what is read right but worth a line
        self.grey: list[Path] = []                 # masks of ids saved as 3-channel grey, read as ids
        self._own = None

    def native(self) -> dict:
        "{split: [(id, image, mask or None)]} as the export lays them out (listed once)."
        if self._own is None: self._own = self.list_splits()
        return self._own

    def list_splits(self) -> dict: raise NotImplementedError
    def decode(self, mask: Path) -> torch.Tensor: raise NotImplementedError
    def line(self) -> str: raise NotImplementedError

    def problems(self, split: str) -> list[str]:
        "What listing `split` found wrong, one line each (a mask's own faults come from `decode`)."
        self.native()
        return self.listing.get(split, [])
    def split_items(self, split: str) -> list:
        "`(id, image, mask or None)` of `split`: the export's own, or for 'val' the ids of `ROOT/val.txt` out of train."
        own = self.native()
        held = self._held(own)
        if split == 'train' and 'train' in own: return [it for it in own['train'] if it[0] not in held]
        if split in own: return own[split]
        if split == 'val' and held: return [it for it in own.get('train', []) if it[0] in held]
        raise DataError(self.root, f'split {split!r}: the {self.name} export has none '
                                   f'(it has {", ".join(own) or "none"}; a list val.txt of ids holds images out of train)')

    def _held(self, own: dict) -> set:
        "Ids `ROOT/val.txt` holds out of train (where the export has no val split of its own)."
        f = self.root/'val.txt'
        if 'val' in own or not f.is_file(): return set()
        known = {i for i, _, _ in own.get('train', [])}
        out = set()
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if not line.strip() or line.startswith('#'): continue
            i = PurePosixPath(line.strip().split()[0]).with_suffix('').as_posix()
            if i not in known: raise DataError(f, f'line {n}: {line.strip()!r} is no image id of the export')
            out.add(i)
        return out

    def has_split(self, split: str) -> bool: return split in self.native() or (split == 'val' and bool(self._held(self.native())))



def coco_mask_api(where):
    "pycocotools' `mask` module, or a `DataError` saying how to install it."
    try: from pycocotools import mask
    except ImportError:
        raise DataError(where, "reading COCO polygons and RLE needs pycocotools: pip install 'ael_nb[coco]'") from None
    return mask

COCO_SPLITS = {'train': 'train', 'val': 'val', 'valid': 'val', 'validation': 'val', 'test': 'test',
               'default': 'train', 'trainval': 'train'}

def coco_split(path: Path, root: Path) -> str:
    "The split a COCO file holds: `instances_val2017.json` 'val', `valid/_annotations.coco.json` 'val', else 'train'."
    stem = path.parent.name if path.name == '_annotations.coco.json' else path.stem
    key = stem.removeprefix('instances_').rstrip('0123456789').lower()
    return COCO_SPLITS.get(key, key if path.parent != root/'annotations' else 'train')

def read_coco(path: Path) -> dict|None:
    "The COCO document at `path` (a JSON object with images, annotations and categories), else None."
    try: d = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError): return None
    return d if isinstance(d, dict) and {'images', 'annotations', 'categories'} <= set(d) else None

def coco_files(root: Path) -> dict:
    "{file: document} of an export's COCO files: `annotations/*.json`, `<split>/_annotations.coco.json`, `ROOT/*.json`."
    cands = [*sorted((root/'annotations').glob('*.json')), *sorted(root.glob('*/_annotations.coco.json')),
             *sorted(root.glob('*.json'))]
    return {p: d for p in cands if (d := read_coco(p)) is not None}



def coco_categories(docs: dict) -> tuple[list[dict], list[str]]:
    "The categories (by id) that are classes, and a note per group category dropped (Roboflow's project, id 0)."
    cats, where = {}, {}
    for p, d in docs.items():
        for c in d['categories']:
            if c['id'] in cats and cats[c['id']]['name'] != c['name']:
                raise DataError(p, f"category id {c['id']} is {c['name']!r} here but {cats[c['id']]['name']!r} in "
                                   f"{where[c['id']].name}: the splits must share one category list")
            cats[c['id']] = c; where.setdefault(c['id'], p)
    used = {a.get('category_id') for d in docs.values() for a in d['annotations']}
    supers = {c.get('supercategory') for c in cats.values()}
    group = [c for c in cats.values() if c['name'] in supers and c['id'] not in used]
    out = [c for _, c in sorted(cats.items()) if c not in group]
    names = [c['name'] for c in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice: raise DataError(next(iter(docs)), f'two categories share the name {twice[0]!r}: rename one')
    return out, [f"{where[c['id']]}: category {c['name']!r} (id {c['id']}) is the supercategory of others and no "
                 'annotation uses it: a group name, not a class' for c in group]

def polygon_outside(seg: list, w: int, h: int) -> tuple|None:
    "The first point of COCO polygons more than a pixel outside a w x h image, else None."
    for poly in seg:
        for x, y in zip(poly[0::2], poly[1::2]):
            if not (-1 <= x <= w + 1 and -1 <= y <= h + 1): return (x, y)
    return None

class CocoExport(Export):
    "COCO instances JSON: polygons and RLE (pycocotools), `iscrowd`, category ids with gaps, images without annotations."
    name = 'COCO'
    def __init__(self, root, rules=Rules(), docs=None):
        super().__init__(root, rules)
        self.docs = docs if docs is not None else coco_files(self.root)
        cats, self.notes = coco_categories(self.docs)
        bg = [c['name'] for c in cats if c['name'].lower() in ('background', '_background_')]
        # uncovered pixels are background: train id 0, unless a category is named so
        self.cats = cats
        self.train_id = {c['id']: k + (not bg) for k, c in enumerate(cats)}
        names = [c['name'] for c in cats]
        ids = [c['id'] for c in cats]
        if not bg: names, ids = ['background', *names], [min([0, *ids]) - (0 in ids), *ids]
        self.background = 0 if not bg else self.train_id[cats[[c['name'] for c in cats].index(bg[0])]['id']]
        self.classes = classes_of(names, ids=ids, path=next(iter(self.docs)), files=list(self.docs))
        self._src = {}

    def _image(self, p: Path, split_dir: str, fn: str) -> Path:
        "Where a COCO `file_name` is: beside the JSON, under images/ (or images/<split>/), <split>/, ROOT."
        cands = [p.parent/fn, self.root/'images'/fn, self.root/'images'/split_dir/fn, self.root/split_dir/fn, self.root/fn]
        return next((c for c in cands if c.is_file()), cands[1] if (self.root/'images').is_dir() else cands[0])

    def list_splits(self) -> dict:
        own, cache = {}, cache_dir(self.root)
        for p, d in self.docs.items():
            split, bad = coco_split(p, self.root), self.listing.setdefault(coco_split(p, self.root), [])
            split_dir = p.parent.name if p.name == '_annotations.coco.json' else p.stem.removeprefix('instances_')
            imgs = {im['id']: im for im in d['images']}
            anns = {}
            for a in d['annotations']:
                if a.get('image_id') not in imgs:
                    bad.append(f"{p}: annotation {a.get('id')} is of image id {a.get('image_id')}, which images does "
                               'not list (a mask without its image)')
                else: anns.setdefault(a['image_id'], []).append(a)
            key = stamp_key(p, self.rules.key)
            items = own.setdefault(split, [])
            for iid, im in imgs.items():
                ip = self._image(p, split_dir, im['file_name'])
                i = PurePosixPath(im['file_name']).with_suffix('').as_posix()
                if not ip.is_file():
                    bad.append(f'{ip}: listed in {p.name} (image id {iid}) but missing'); continue
                lp = None
                if iid in anns:
                    lp = cache/f'coco-{key}'/f'{i}.png'
                    self._src[lp] = (p, im, ip, anns[iid])
                items.append((i, ip, lp))
        return own

    def rasterise(self, p: Path, im: dict, ip: Path, anns: list, count: bool = False):
        "Train ids `uint8 [H,W]` of one image's annotations (and the pixels two classes' instances both cover)."
        mask = coco_mask_api(p)
        h, w = im['height'], im['width']
        with Image.open(ip) as f: size = f.size
        if size != (w, h):
            raise DataError(p, f"image {im['file_name']!r} is {size[0]}x{size[1]} in its file but {w}x{h} in images "
                               f"(image id {im['id']})")
        where = lambda a: f"annotation {a.get('id')} (image {im['file_name']!r})"
        masks = []
        for a in anns:
            if a.get('category_id') not in self.train_id:
                raise DataError(p, f"{where(a)} has category_id {a.get('category_id')}, which categories does not "
                                   f"define ({_ranges(sorted(self.train_id))})")
            seg = a.get('segmentation')
            if isinstance(seg, list) and seg:
                if (pt := polygon_outside(seg, w, h)) is not None:
                    raise DataError(p, f'{where(a)}: polygon point {pt} is outside the image ({w}x{h})')
                if any(len(q) < 6 for q in seg): raise DataError(p, f'{where(a)}: a polygon of fewer than 3 points')
                m = mask.decode(mask.merge(mask.frPyObjects(seg, h, w)))
            elif isinstance(seg, dict) and 'counts' in seg:
                if list(seg.get('size', [])) != [h, w]:
                    raise DataError(p, f"{where(a)}: RLE size {seg.get('size')} is not the image's [h, w] [{h}, {w}]")
                rle = mask.frPyObjects(seg, h, w) if isinstance(seg['counts'], list) else \
                    dict(size=seg['size'], counts=seg['counts'].encode() if isinstance(seg['counts'], str) else seg['counts'])
                m = mask.decode(rle)
            else: raise DataError(p, f'{where(a)} has no segmentation (a box is no mask)')
            masks.append((bool(a.get('iscrowd')), m.astype(bool), a))
        # crowd regions first, instances over them: later in the file, or the smaller, painted last
        crowd = [m for m in masks if m[0]]
        inst = [m for m in masks if not m[0]]
        if self.rules.overlap == 'smaller': inst.sort(key=lambda m: -int(m[1].sum()))
        out = np.full((h, w), self.background, np.int64)
        cover, both = np.full((h, w), -1, np.int64), 0
        for is_crowd, m, a in crowd + inst:
            t = IGNORE_INDEX if is_crowd and self.rules.crowd == 'ignore' else self.train_id[a['category_id']]
            if not is_crowd:
                both += int((m & (cover >= 0) & (cover != t)).sum()); cover[m] = t
            out[m] = t
        return (out, both) if count else out

    def decode(self, lp: Path) -> torch.Tensor:
        if lp.is_file(): return torch.from_numpy(read_label(lp))
        if lp not in self._src: raise DataError(lp, 'mask is no image of this COCO export')
        return torch.from_numpy(read_label(save_ids(self.rasterise(*self._src[lp]), lp)))

    def overlap_note(self) -> list[str]:
        "A line on the pixels two instances of different classes cover, and which one the rule lets win."
        n = imgs = 0
        for lp, src in self._src.items():
            try: k = self.rasterise(*src, count=True)[1]
            except DataError: continue
            n, imgs = n + k, imgs + (k > 0)
        rule = ('the later in the file wins (data.overlap=later; data.overlap=smaller lets the smaller win)'
                if self.rules.overlap == 'later' else
                'the smaller wins (data.overlap=smaller; data.overlap=later lets the later in the file win)')
        return [f'{next(iter(self.docs))}: {n} px of {imgs} images are covered by instances of two classes: {rule}'] if n else []

    def line(self) -> str:
        own = self.native()
        n = sum(len(v) for v in own.values()); lab = sum(lp is not None for v in own.values() for _, _, lp in v)
        cats = ', '.join(f"{c['name']} {c['id']}->{self.train_id[c['id']]}" for c in self.cats[:6]) + \
            (', ...' if len(self.cats) > 6 else '')
        return (f"found a COCO instances export ({', '.join(str(p.relative_to(self.root)) for p in self.docs)}): "
                f"{len(self.cats)} categories as train ids ({cats}), uncovered pixels background "
                f"{self.background}, polygons and RLE by pycocotools, crowd regions "
                f"{'their category' if self.rules.crowd == 'class' else 'ignored'} (data.crowd={self.rules.crowd}), "
                f"overlaps: the {self.rules.overlap} instance wins (data.overlap={self.rules.overlap}); "
                f"{lab} of {n} images annotated, {n - lab} without annotations unlabeled")



VOC_BORDER = (224, 224, 192)   # the colour of the 255 border in VOC's palette

def read_labelmap(path: Path) -> tuple[list[str], list[tuple]]:
    "Names and colours of CVAT's `labelmap.txt` (`name:r,g,b:parts:actions` a line, `#` comments)."
    names, colors = [], []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith('#'): continue
        parts = line.split(':')
        try: c = tuple(int(x) for x in parts[1].split(','))
        except (IndexError, ValueError): c = ()
        if len(c) != 3 or not all(0 <= x <= 255 for x in c):
            raise DataError(path, f'line {n}: expected name:r,g,b:parts:actions, got {line.strip()!r}')
        names.append(parts[0].strip()); colors.append(c)
    if len(set(colors)) < len(colors): raise DataError(path, 'two labels have the same colour')
    return names, colors

def read_names(path: Path) -> list[str]:
    "Class names one a line (labelme2voc's `class_names.txt`, `__ignore__` left out)."
    return [s.strip() for s in path.read_text().splitlines() if s.strip() and s.strip() != '__ignore__']

class VOCExport(Export):
    "Pascal VOC, CVAT's 'Segmentation mask 1.1' and labelme2voc: JPEGImages/, SegmentationClass/, the lists."
    name = 'Pascal VOC'
    def __init__(self, root, rules=Rules()):
        super().__init__(root, rules)
        r = self.root
        self.masks = r/'SegmentationClassPNG' if (r/'SegmentationClassPNG').is_dir() else r/'SegmentationClass'
        if (r/'labelmap.txt').is_file():
            names, colors = read_labelmap(r/'labelmap.txt'); self.source = r/'labelmap.txt'
        elif (r/'class_names.txt').is_file():
            names = read_names(r/'class_names.txt'); colors = voc_palette(len(names)); self.source = r/'class_names.txt'
        else: names, colors, self.source = VOC_INFO.class_names, VOC_INFO.palette, None
        self.colour = {tuple(c): k for k, c in enumerate(colors)}
        if VOC_BORDER not in self.colour: self.colour[VOC_BORDER] = IGNORE_INDEX
        self.classes = classes_of(names, colors, path=self.source,
                                  files=[*([self.source] if self.source else []), *visible_files(self.masks, '*.png')])

    def list_splits(self) -> dict:
        imgs = image_ids(self.root/'JPEGImages')
        masks = {p.relative_to(self.masks).with_suffix('').as_posix(): p for p in visible_files(self.masks, '*.png')}
        sets = self.root/'ImageSets'/'Segmentation'
        lists = {s: sets/f'{s}.txt' for s in ('train', 'val', 'trainval', 'default', 'test') if (sets/f'{s}.txt').is_file()}
        bad = self.listing.setdefault('train', [])
        bad += [f'{p}: mask without an image (no {self.root/"JPEGImages"/i}.jpg)' for i, p in masks.items() if i not in imgs]
        listed = {}
        for s, f in lists.items():
            ids = []
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if not line.strip(): continue
                i = line.split()[0]
                if i not in imgs:
                    self.listing.setdefault(COCO_SPLITS.get(s, s), []).append(
                        f'{self.root/"JPEGImages"/i}.jpg: listed in {f.relative_to(self.root)} (line {n}) but missing')
                else: ids.append(i)
            listed[s] = ids
        train = listed.get('train') or ([] if 'val' in listed else listed.get('trainval') or listed.get('default', []))
        inlist = {i for v in listed.values() for i in v}
        # an image in no list is a training image: labeled if it has a mask, else unlabeled
        train = list(dict.fromkeys([*train, *(i for i in imgs if i not in inlist)]))
        own = {'train': [(i, imgs[i], masks.get(i)) for i in train]}
        if listed.get('val'): own['val'] = [(i, imgs[i], masks.get(i)) for i in listed['val']]
        return own

    def decode(self, lp: Path) -> torch.Tensor:
        raw, k = read_mask(lp), len(self.classes['names'])
        what = f"no class of {self.source.name if self.source else 'VOC'} (0..{k - 1}) nor the border 255"
        if raw.ndim == 3:
            if (g := grey_ids(raw)) is None or all(tuple(c) in self.colour for c in np.unique(raw.reshape(-1, 3), axis=0)):
                src = self.source.name if self.source else "VOC's palette"
                return colour_ids(raw, self.colour, lp, f'no colour of {src}')
            self.grey.append(lp); raw = g.astype(np.int64)
        return lut_ids(raw, {**{v: v for v in range(k)}, IGNORE_INDEX: IGNORE_INDEX}, lp, what)

    def line(self) -> str:
        own = self.native()
        lab = sum(lp is not None for _, _, lp in own['train'])
        src = (f'classes of {self.source.name} ({len(self.classes["names"])})' if self.source else
               "VOC's 21 classes (no labelmap.txt or class_names.txt)")
        return (f'found a Pascal VOC export ({self.masks.name}/, JPEGImages/): {src}, a palette or grey mask as '
                f'class ids, an RGB mask by its colours, 255 and {VOC_BORDER} the ignored border; '
                f'train {lab} of {len(own["train"])} images with a mask, the rest unlabeled'
                + (f', val {len(own["val"])}' if 'val' in own else ''))



ROBOFLOW_SPLITS = {'train': 'train', 'valid': 'val', 'val': 'val', 'test': 'test'}

def read_roboflow_classes(path: Path) -> dict:
    "{pixel value: class name} of Roboflow's `_classes.csv` (`Pixel Value,Class`)."
    rows = [r for r in csv.reader(path.read_text().splitlines()) if any(x.strip() for x in r)]
    if rows and not rows[0][0].strip().isdigit(): rows = rows[1:]
    out = {}
    for n, r in enumerate(rows, 2):
        if len(r) < 2 or not r[0].strip().isdigit():
            raise DataError(path, f'line {n}: expected "pixel value,class", got {",".join(r)!r}')
        out[int(r[0])] = r[1].strip()
    if not out: raise DataError(path, 'no class: expected lines "pixel value,class"')
    return dict(sorted(out.items()))

class RoboflowExport(Export):
    "Roboflow's 'Semantic Segmentation Masks': `x.jpg` and `x_mask.png` side by side, `_classes.csv`, a folder a split."
    name = 'Roboflow'
    def __init__(self, root, rules=Rules()):
        super().__init__(root, rules)
        r = self.root
        self.dirs = {ROBOFLOW_SPLITS.get(d.name, d.name): d for d in sorted(r.iterdir())
                     if d.is_dir() and (d/'_classes.csv').is_file()} or {'train': r}
        tables = {d/'_classes.csv': read_roboflow_classes(d/'_classes.csv') for d in self.dirs.values()}
        (first, self.values), *rest = tables.items()
        for p, t in rest:
            if t != self.values: raise DataError(p, f'classes differ from those of {first}: {t} vs {self.values}')
        self.train_id = {v: k for k, v in enumerate(self.values)}
        self.classes = classes_of(list(self.values.values()), ids=list(self.values), path=first,
                                  files=[*tables, *(p for d in self.dirs.values() for p in visible_files(d, '*_mask.png'))])

    def list_splits(self) -> dict:
        own = {}
        for s, d in self.dirs.items():
            imgs = {i: p for i, p in image_ids(d).items() if not i.endswith('_mask')}
            masks = {i[:-5]: p for i, p in image_ids(d).items() if i.endswith('_mask')}
            self.listing.setdefault(s, []).extend(f'{p}: mask without its image (no {d/i}.jpg beside it)'
                                                 for i, p in masks.items() if i not in imgs)
            own[s] = [(i, p, masks.get(i)) for i, p in imgs.items()]
        return own

    def decode(self, lp: Path) -> torch.Tensor:
        raw = read_mask(lp)
        if raw.ndim == 3:
            if (g := grey_ids(raw)) is None:
                raise DataError(lp, f'an RGB mask of colours: Roboflow masks hold the pixel values of _classes.csv '
                                    f'({_ranges(list(self.values))}); export "Semantic Segmentation Masks" again')
            self.grey.append(lp); raw = g.astype(np.int64)
        return lut_ids(raw, self.train_id, lp, f'no pixel value of _classes.csv ({_ranges(list(self.values))})')

    def line(self) -> str:
        own = self.native()
        split = ', '.join(f'{s} {sum(lp is not None for _, _, lp in v)} of {len(v)}' for s, v in own.items())
        cl = ', '.join(f'{n} {v}->{self.train_id[v]}' for v, n in list(self.values.items())[:6])
        return (f'found a Roboflow semantic-mask export (_classes.csv, x_mask.png beside x.jpg): pixel values as '
                f'train ids ({cl}); images with a mask: {split}, the rest unlabeled')



CITYSCAPES_LABEL_IDS = range(34)   # labelIds 0..33; those of no train id are ignored

class CityscapesExport(Export):
    "The Cityscapes layout: `leftImg8bit/<split>/<city>/x_leftImg8bit.png`, `gtFine/.../x_gtFine_labelIds.png`."
    name = 'Cityscapes'
    def __init__(self, root, rules=Rules()):
        super().__init__(root, rules)
        self.table = {**{i: IGNORE_INDEX for i in CITYSCAPES_LABEL_IDS}, **CITYSCAPES_ID_TO_TRAINID,
                      IGNORE_INDEX: IGNORE_INDEX}
        inv = {t: i for i, t in CITYSCAPES_ID_TO_TRAINID.items()}
        self.classes = classes_of(CITYSCAPES_INFO.class_names, CITYSCAPES_INFO.palette,
                                  ids=[inv[k] for k in range(len(CITYSCAPES_INFO.class_names))],
                                  files=visible_files(self.root/'gtFine', '*_labelIds.png'))

    def list_splits(self) -> dict:
        own = {}
        for d in sorted(p for p in (self.root/'leftImg8bit').iterdir() if p.is_dir()):
            s = d.name
            imgs = {p.relative_to(d).as_posix().removesuffix('_leftImg8bit.png'): p
                    for p in visible_files(d, '*_leftImg8bit.png')}
            g = self.root/'gtFine'/s
            masks = {p.relative_to(g).as_posix().removesuffix('_gtFine_labelIds.png'): p
                     for p in (visible_files(g, '*_gtFine_labelIds.png') if g.is_dir() else [])}
            self.listing.setdefault(s, []).extend(f'{p}: mask without its image (no {d/i}_leftImg8bit.png)'
                                                 for i, p in masks.items() if i not in imgs)
            own[s] = [(i, p, masks.get(i)) for i, p in imgs.items()]
        return own

    def decode(self, lp: Path) -> torch.Tensor:
        raw = read_mask(lp)
        if raw.ndim == 3:
            if (g := grey_ids(raw)) is None:
                raise DataError(lp, 'an RGB mask of colours: the labelIds PNG holds ids (gtFine_color.png is the picture)')
            self.grey.append(lp); raw = g.astype(np.int64)
        return lut_ids(raw, self.table, lp, 'no Cityscapes labelId (0..33) nor 255')

    def line(self) -> str:
        own = self.native()
        split = ', '.join(f'{s} {sum(lp is not None for _, _, lp in v)} of {len(v)}' for s, v in own.items())
        return ('found the Cityscapes layout (leftImg8bit/, gtFine/*_labelIds.png): labelIds as the 19 trainIds '
                f'(7->0 road, 8->1 sidewalk, ..., 33->18 bicycle), the other labelIds ignored; images with a mask: '
                f'{split}, the rest unlabeled')



def shape_mask(size: tuple, shape: dict, where) -> np.ndarray:
    "The pixels of one LabelMe shape on an image of `size` (w, h), drawn as labelme's `shape_to_mask` draws them."
    im = Image.new('L', size); draw = ImageDraw.Draw(im)
    xy, kind = [tuple(float(v) for v in p) for p in shape.get('points', [])], shape.get('shape_type') or 'polygon'
    need = dict(circle=2, rectangle=2, line=2, point=1)
    if kind in need and len(xy) != need[kind] or kind == 'polygon' and len(xy) < 3:
        raise DataError(where, f"shape {shape.get('label')!r}: a {kind} of {len(xy)} points")
    if kind == 'circle':
        (cx, cy), (px, py) = xy; d = ((cx - px) ** 2 + (cy - py) ** 2) ** 0.5
        draw.ellipse([cx - d, cy - d, cx + d, cy + d], outline=1, fill=1)
    elif kind == 'rectangle':
        (x0, y0), (x1, y1) = xy
        draw.rectangle([min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)], outline=1, fill=1)
    elif kind in ('line', 'linestrip'): draw.line(xy, fill=1, width=10)
    elif kind == 'point':
        (cx, cy), = xy; draw.ellipse([cx - 5, cy - 5, cx + 5, cy + 5], outline=1, fill=1)
    elif kind == 'polygon': draw.polygon(xy, outline=1, fill=1)
    else: raise DataError(where, f"shape {shape.get('label')!r}: shape_type {kind!r} is not read "
                                 '(polygon, rectangle, circle, line, linestrip, point)')
    return np.array(im, bool)

class LabelMeExport(Export):
    "LabelMe: one JSON per image (polygons, rectangles, circles, `imageData`), labels by name, `labels.txt` if given."
    name = 'LabelMe'
    def __init__(self, root, rules=Rules(), files=None):
        super().__init__(root, rules)
        self.jsons = files if files is not None else labelme_files(self.root)
        self.docs = {p: json.loads(p.read_text()) for p in self.jsons}
        if (self.root/'labels.txt').is_file():
            names = [n for n in read_names(self.root/'labels.txt')]
            self.source = self.root/'labels.txt'
        else:
            used = sorted({s.get('label') for d in self.docs.values() for s in d['shapes']} - {'__ignore__', '_background_'})
            names, self.source = ['_background_', *used], None
        if names[0] not in ('_background_', 'background'): names = ['_background_', *names]
        self.train_id = {n: k for k, n in enumerate(names)}
        self.classes = classes_of(names, path=self.source, files=[*self.jsons, *([self.source] if self.source else [])])
        self._src = {}

    def _split(self, p: Path) -> str:
        top = p.relative_to(self.root).parts[0]
        return ROBOFLOW_SPLITS.get(top, 'train') if len(p.relative_to(self.root).parts) > 1 else 'train'

    def list_splits(self) -> dict:
        own, cache, seen = {}, cache_dir(self.root), set()
        for p, d in self.docs.items():
            s, i = self._split(p), p.relative_to(self.root).with_suffix('').as_posix()
            ip = (p.parent/d.get('imagePath', '')).resolve() if d.get('imagePath') else None
            if ip is None or not ip.is_file():
                beside = [q.name for q in sorted(p.parent.glob(p.stem + '.*')) if q.suffix.lower() in IMAGE_EXTS]
                if d.get('imageData'):
                    ip = cache/'labelme-images'/f'{i}.png'
                    if not ip.is_file():
                        with Image.open(io.BytesIO(base64.b64decode(d['imageData']))) as im:
                            ip.parent.mkdir(parents=True, exist_ok=True)
                            tmp = ip.with_name(f'.{ip.name}.{os.getpid()}.tmp'); im.convert('RGB').save(tmp, 'PNG')
                            os.replace(tmp, ip)
                else:
                    self.listing.setdefault(s, []).append(
                        f"{p}: imagePath {d.get('imagePath')!r} names no file and the JSON holds no imageData" +
                        (f'; the image beside it is {beside[0]}: set imagePath to {beside[0]!r}' if beside else ''))
                    continue
            seen.add(ip.resolve())
            lp = None
            if d['shapes'] or self.rules.empty == 'background':
                lp = cache/f'labelme-{self.rules.key}'/f'{i}.{stamp_key(p)}.png'
                self._src[lp] = (p, d, ip)
            own.setdefault(s, []).append((i, ip, lp))
        for q in visible_files(self.root):
            if q.suffix.lower() in IMAGE_EXTS and q.resolve() not in seen:
                own.setdefault(self._split(q), []).append((q.relative_to(self.root).with_suffix('').as_posix(), q, None))
        return own

    def rasterise(self, p: Path, d: dict, ip: Path) -> np.ndarray:
        "Train ids of one LabelMe JSON: shapes in the file's order (later on top), or the smaller on top."
        with Image.open(ip) as f: size = f.size
        w, h = d.get('imageWidth', size[0]), d.get('imageHeight', size[1])
        if (w, h) != size:
            raise DataError(p, f'imageWidth x imageHeight {w}x{h} disagrees with the image {ip.name} ({size[0]}x{size[1]})')
        out = np.zeros((h, w), np.int64)
        shapes = []
        for s in d['shapes']:
            lab = s.get('label')
            if lab != '__ignore__' and lab not in self.train_id:
                raise DataError(p, f'label {lab!r} is not in {self.source.name}: add it there or rename the shape')
            pts = s.get('points', [])
            if any(not (-1 <= x <= w + 1 and -1 <= y <= h + 1) for x, y in pts):
                x, y = next((x, y) for x, y in pts if not (-1 <= x <= w + 1 and -1 <= y <= h + 1))
                raise DataError(p, f'shape {lab!r}: point ({x}, {y}) is outside the image ({w}x{h})')
            shapes.append((shape_mask((w, h), s, p), IGNORE_INDEX if lab == '__ignore__' else self.train_id[lab]))
        if self.rules.overlap == 'smaller': shapes.sort(key=lambda m: -int(m[0].sum()))
        for m, t in shapes: out[m] = t
        return out

    def decode(self, lp: Path) -> torch.Tensor:
        if lp.is_file(): return torch.from_numpy(read_label(lp))
        if lp not in self._src: raise DataError(lp, 'mask is no image of this LabelMe export')
        return torch.from_numpy(read_label(save_ids(self.rasterise(*self._src[lp]), lp)))

    def line(self) -> str:
        own = self.native()
        n = sum(len(v) for v in own.values()); lab = sum(lp is not None for v in own.values() for _, _, lp in v)
        empty = sum(not d['shapes'] for d in self.docs.values())
        cl = (f'labels of {self.source.name}' if self.source else 'labels found in the JSONs, sorted') + \
            f" ({', '.join(f'{n}={k}' for n, k in list(self.train_id.items())[:6])})"
        return (f'found a LabelMe export ({len(self.docs)} JSONs): {cl}, shapes drawn as labelme2voc draws them, '
                f'overlaps: the {self.rules.overlap} shape wins (data.overlap={self.rules.overlap}); '
                f'{lab} of {n} images labeled, images without a JSON unlabeled' +
                (f', {empty} JSONs explicitly empty read as '
                 f"{'all background' if self.rules.empty == 'background' else 'unlabeled'} (data.empty={self.rules.empty})"
                 if empty else ''))

def labelme_files(root: Path) -> list[Path]:
    "LabelMe JSONs under `root`: objects with `shapes` and `imagePath` (or `imageData`)."
    out = []
    for p in visible_files(root, '*.json'):
        try: d = json.loads(p.read_text())
        except (OSError, ValueError, UnicodeDecodeError): continue
        if isinstance(d, dict) and isinstance(d.get('shapes'), list) and ('imagePath' in d or 'imageData' in d): out.append(p)
    return out



EXPORTS = dict(cityscapes=CityscapesExport, voc=VOCExport, coco=CocoExport, roboflow=RoboflowExport,
               labelme=LabelMeExport)

def find_export(root, rules: Rules = Rules()) -> Export|None:
    "The labelling-tool export at `root`, recognised by its files; None for the kit's own layout (or nothing known)."
    r = Path(root)
    if any((r/n).is_file() for n in ('classes.yaml', 'classes.yml', 'classes.csv')): return None
    if (r/'leftImg8bit').is_dir() and (r/'gtFine').is_dir(): return CityscapesExport(r, rules)
    if (r/'JPEGImages').is_dir() and ((r/'SegmentationClass').is_dir() or (r/'SegmentationClassPNG').is_dir()):
        return VOCExport(r, rules)
    if docs := coco_files(r): return CocoExport(r, rules, docs)
    if (r/'_classes.csv').is_file() or any((d/'_classes.csv').is_file() for d in r.iterdir() if d.is_dir()):
        return RoboflowExport(r, rules)
    if files := labelme_files(r): return LabelMeExport(r, rules, files)
    return None

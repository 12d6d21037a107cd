"""What reading COCO exports costs, and what pycocotools buys: install size and import time of pycocotools, reading a
synthetic COCO export of 1,000 images (written here) cold (rasterised into the cache) and warm (from the cache), and
how many pixels a hand-written PIL polygon fill puts differently from COCO's own rasteriser.

    python bench/exports_bench.py --out bench/results/exports [--n 1000] [--datumaro-python PATH]

`--datumaro-python` names a Python that has Datumaro installed (kept out of the kit's environment): its import time
and its reading of the same export are measured there, in its own process."""
import argparse, importlib.metadata, json, os, platform, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path
import numpy as np
from PIL import Image, ImageDraw


def write_export(root: Path, n: int, h: int = 96, w: int = 128, seed: int = 0) -> Path:
    "A COCO export as CVAT writes it: images/default/ and annotations/instances_default.json; 3 polygons and 1 RLE an image."
    from pycocotools import mask as M
    rng = np.random.default_rng(seed)
    (root / 'images/default').mkdir(parents=True); (root / 'annotations').mkdir()
    imgs, anns = [], []
    for k in range(n):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(root / 'images/default' / f'{k:05d}.jpg', quality=80)
        imgs.append(dict(id=k + 1, file_name=f'{k:05d}.jpg', width=w, height=h))
        for j in range(3):                           # star-shaped polygons of 12 points with fractional coordinates
            cx, cy, r = rng.uniform(20, w - 20), rng.uniform(20, h - 20), rng.uniform(6, 18)
            a = np.sort(rng.uniform(0, 2 * np.pi, 12)); rr = r * rng.uniform(0.5, 1.0, 12)
            poly = np.stack([cx + rr * np.cos(a), cy + rr * np.sin(a)], 1).round(2).reshape(-1).tolist()
            anns.append(dict(id=len(anns) + 1, image_id=k + 1, category_id=[1, 3, 7][j], segmentation=[poly], iscrowd=0))
        m = np.zeros((h, w), np.uint8); y, x = rng.integers(0, h - 10), rng.integers(0, w - 20); m[y:y + 10, x:x + 20] = 1
        rle = M.encode(np.asfortranarray(m)); rle['counts'] = rle['counts'].decode()
        anns.append(dict(id=len(anns) + 1, image_id=k + 1, category_id=3, segmentation=rle, iscrowd=1))
    for a in anns:                                    # COCO's area and bbox of each annotation
        r = M.frPyObjects(a['segmentation'], h, w) if isinstance(a['segmentation'], list) else a['segmentation']
        r = M.merge(r) if isinstance(r, list) else r
        a['area'], a['bbox'] = float(M.area(r)), [float(v) for v in M.toBbox(r)]
    cats = [dict(id=i, name=nm, supercategory='thing') for i, nm in ((1, 'car'), (3, 'person'), (7, 'sign'))]
    (root / 'annotations/instances_default.json').write_text(json.dumps(dict(images=imgs, annotations=anns, categories=cats)))
    return root


def dir_size(p: Path) -> int: return sum(f.stat().st_size for f in Path(p).rglob('*') if f.is_file())


def import_time(python: str, module: str, reps: int = 5) -> float:
    "Median seconds to import `module` in a fresh process where numpy is already imported."
    code = f'import numpy, time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)'
    return statistics.median(float(subprocess.run([python, '-c', code], capture_output=True, text=True, check=True).stdout)
                             for _ in range(reps))


def read_all(root: Path) -> tuple[float, float, int]:
    "Seconds to read every mask of the export cold (rasterised into the cache) and warm (from it), and labeled pixels."
    from ael_nb.folder import FolderDataset
    shutil.rmtree(root / '.ael_cache', ignore_errors=True)
    t = time.perf_counter(); ds = FolderDataset(root, tail=[])
    px = sum(int((ds.load_label(lp) > 0).sum()) for _, _, lp in ds.items)
    cold = time.perf_counter() - t
    t = time.perf_counter(); ds = FolderDataset(root, tail=[])
    assert sum(int((ds.load_label(lp) > 0).sum()) for _, _, lp in ds.items) == px
    return cold, time.perf_counter() - t, px


def pil_disagreement(root: Path) -> tuple[int, int]:
    "Pixels where PIL's polygon fill (outline included, as labelme2voc draws) differs from pycocotools', of all covered."
    from pycocotools import mask as M
    d = json.loads((root / 'annotations/instances_default.json').read_text())
    size = {im['id']: (im['width'], im['height']) for im in d['images']}
    diff = tot = 0
    for a in d['annotations']:
        if a['iscrowd']: continue
        w, h = size[a['image_id']]
        ref = M.decode(M.merge(M.frPyObjects(a['segmentation'], h, w))).astype(bool)
        im = Image.new('L', (w, h)); ImageDraw.Draw(im).polygon(list(map(tuple, np.reshape(a['segmentation'][0], (-1, 2)))), fill=1, outline=1)
        diff += int((np.array(im, bool) != ref).sum()); tot += int(ref.sum())
    return diff, tot


DATUMARO = '''
import json, sys, time
t = time.perf_counter(); import datumaro as dm; imp = time.perf_counter() - t
t = time.perf_counter()
ds = dm.Dataset.import_from(sys.argv[1], 'coco_instances')
ds.transform('polygons_to_masks')
n = sum(int(a.image.sum()) for item in ds for a in item.annotations if isinstance(a, dm.Mask))
print(json.dumps(dict(import_s=imp, read_s=time.perf_counter() - t, mask_px=n)))
'''


def added_by(python: str) -> dict:
    "Bytes of each top-level package in `python`'s site-packages that this environment lacks (what installing adds)."
    site = lambda py: Path(subprocess.run([py, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                                          capture_output=True, text=True, check=True).stdout.strip())
    theirs, ours = site(python), site(sys.executable)
    skip = ('pip', 'setuptools', 'pkg_resources', '_distutils_hack', '__pycache__')
    return {p.name: dir_size(p) if p.is_dir() else p.stat().st_size for p in sorted(theirs.iterdir())
            if not p.name.endswith(('.dist-info', '.pth')) and p.name not in skip and not (ours / p.name).exists()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--out', default='bench/results/exports'); p.add_argument('--n', type=int, default=1000)
    p.add_argument('--datumaro-python', default=None)
    a = p.parse_args(argv)
    import pycocotools
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = write_export(Path(tmp) / 'coco', a.n)
        cold, warm, px = read_all(root)
        diff, tot = pil_disagreement(root)
        r = dict(cpu=platform.processor() or platform.machine(), threads=os.cpu_count(), images=a.n,
                 load_average=os.getloadavg(), pycocotools=importlib.metadata.version('pycocotools'),
                 pycocotools_installed_bytes=dir_size(Path(pycocotools.__file__).parent),
                 pycocotools_import_s=import_time(sys.executable, 'pycocotools.mask'),
                 read_cold_s=cold, read_warm_s=warm, labeled_px=px, pil_vs_coco_px=diff, coco_polygon_px=tot)
        if a.datumaro_python:
            res = subprocess.run([a.datumaro_python, '-c', DATUMARO, str(root)], capture_output=True, text=True)
            r['datumaro'] = json.loads(res.stdout.strip().splitlines()[-1]) if res.returncode == 0 else res.stderr.strip()[-400:]
            r['datumaro_import_s_median'] = import_time(a.datumaro_python, 'datumaro') if res.returncode == 0 else None
            r['datumaro_adds_bytes'] = added_by(a.datumaro_python)
    tmpf = out / '.exports.json.tmp'; tmpf.write_text(json.dumps(r, indent=1)); os.replace(tmpf, out / 'exports.json')
    print(json.dumps(r, indent=1))


if __name__ == '__main__':
    main()

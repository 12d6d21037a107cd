"""Write a down-scaled copy of CamVid (images bilinear, labels nearest) for CPU benchmarks.

    python bench/prepare_camvid.py [--src CAMVID_ROOT] [--dst bench/_work/camvid_180x240] [--size 180 240]

The source defaults to $AEL_CAMVID_ROOT (a SegNet-layout CamVid folder); the destination is under bench/_work/,
which git ignores.

The copy has the layout `ael_nb.datasets.CamVid` reads (split/ and splitannot/ folders, same file names,
hence the same ids as the shipped manifests). The source is never written to."""
import argparse, os
from pathlib import Path
from PIL import Image

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--src', default=os.environ.get('AEL_CAMVID_ROOT'), help='CamVid root (default: $AEL_CAMVID_ROOT)')
    ap.add_argument('--dst', default=str(Path(__file__).resolve().parent / '_work' / 'camvid_180x240'))
    ap.add_argument('--size', type=int, nargs=2, default=(180, 240), metavar=('H', 'W'))
    args = ap.parse_args()
    if not args.src: ap.error('no CamVid root: pass --src or set AEL_CAMVID_ROOT')
    src, dst, (h, w) = Path(args.src), Path(args.dst), args.size
    if not (src / 'train').is_dir(): ap.error(f'{src}: no train/ folder (SegNet CamVid layout expected)')
    n = 0
    for split in ('train', 'val'):
        for sub, resample in ((split, Image.BILINEAR), (split + 'annot', Image.NEAREST)):
            (dst / sub).mkdir(parents=True, exist_ok=True)
            for p in sorted((src / sub).glob('*.png')):
                q = dst / sub / p.name
                if q.exists(): continue
                Image.open(p).resize((w, h), resample).save(q); n += 1
    print(f'{dst}: wrote {n} files ({h}x{w})')

if __name__ == '__main__': main()

"""The authors' adaptive-CutMix region search, for timing next to the kit's (bench/cost.py, part b).

Written here from the published description (paper, Sec. 3.3 and appendix A, and what the authors' code does there),
not copied from their code: per source image, on
the CPU, label the connected components of the teacher's predicted class with scikit-image, pick a random component
larger than `min_area` of the image, cut its bounding box; without one, a random box of half the image."""
from __future__ import annotations
import numpy as np
import torch
from skimage.measure import label


def half_image_box(h: int, w: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
    "A random box of half the image, log-uniform aspect ratio: (y0, x0, y1, x1), end exclusive."
    u = rng.random(3)
    hf = 0.5 ** u[0]
    bh, bw = min(h, max(1, round(hf * h))), min(w, max(1, round(0.5 / hf * w)))
    y0, x0 = int(u[1] * (h - bh + 1)), int(u[2] * (w - bw + 1))
    return y0, x0, y0 + bh, x0 + bw


def authors_acm_boxes(
    src_probs: torch.Tensor,  # [B,C,H,W] teacher's probabilities (or logits) on the sources, any device
    classes: torch.Tensor,  # long [B] class to cut out of each source
    rng: np.random.Generator,  # source of randomness
    min_area: float = 0.005,  # a component must cover more than this fraction of the image
) -> tuple[np.ndarray, np.ndarray]:  # (int [B,4] boxes (y0, x0, y1, x1), bool [B] found)
    "Per image on the CPU: scikit-image components of argmax == class, a random one above `min_area`, its box."
    pred = src_probs.argmax(1).cpu().numpy()
    B, H, W = pred.shape
    boxes, found = np.zeros((B, 4), dtype=np.int64), np.zeros(B, dtype=bool)
    for i, c in enumerate(torch.as_tensor(classes).tolist()):
        comp = label(pred[i] == c, connectivity=2)
        area = np.bincount(comp.ravel())
        ok = np.flatnonzero(area[1:] > min_area * H * W) + 1
        if len(ok):
            ys, xs = np.nonzero(comp == rng.choice(ok))
            boxes[i], found[i] = (ys.min(), xs.min(), ys.max() + 1, xs.max() + 1), True
        else:
            boxes[i] = half_image_box(H, W, rng)
    return boxes, found

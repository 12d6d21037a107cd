"""What ACM's region search (`ael_nb.cutmix.component_ids`) costs on the CPU at the paper's 769 x 769 crop: a batch of
2 maps of blobs, on 4x4 cells (`method.acm_stride=4`, 193 x 193) and on the pixels (the authors', 769 x 769), with the
default hook (`scatter_reduce` 'amax') and under `run.deterministic` (a sort). One thread; the best of 3 calls."""
import platform, time
import torch
import torch.nn.functional as F
from ael_nb.core import set_deterministic
from ael_nb.cutmix import component_ids

if __name__ == '__main__':
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, {platform.processor() or platform.machine()}")
    for side in (193, 769):
        m = F.avg_pool2d(torch.rand(2, 1, side, side, generator=g), 9, 1, 4)[:, 0] > 0.5
        for det in (False, True):
            set_deterministic(det)
            times = []
            for _ in range(3):
                t = time.perf_counter(); component_ids(m); times.append(time.perf_counter() - t)
            print(f"{side} x {side}, 2 maps, {'deterministic' if det else 'default'}: {min(times) * 1e3:.0f} ms")
    set_deterministic(False)

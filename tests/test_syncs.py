"""Host synchronisations of one training step (`ael_nb.core.count_syncs`), held to a fixed number per method.
Each one stalls a GPU until its queue drains; the step proper is counted (its batches are rendered beforehand,
as a GPU run's loader workers do), on a step that writes no log line. A failure prints where each sync came from."""
import pytest
import torch
from ael_nb.config import get_config
from ael_nb.core import count_syncs
from ael_nb.plan import TINY
from ael_nb.train import setup

# What remains, per method, and why each cannot go (a failure prints each site):
# - every method, 1: the trainer reads whether the step's loss is finite (`Run._finite`), because a non-finite loss
#   must stop the run or skip the update before the optimiser touches the weights (`21_faults`).
# - AEL (ACM on), 3 more: `AcmSources.submit` copies the next step's image indices and seeds to the host (one copy),
#   which loads those images; `component_ids` iterates until its labels stop changing
#   (`torch.equal`, one read per iteration, 1 here); Copy-Paste reads how many images get a paste, which decides how
#   many random numbers the jitter draws and so every later draw (`12_copy_paste`).
# - FixMatch 1 more, UniMatch 2 more: `strong_view` reads its uniforms to choose each image's photometric ops
#   (torchvision's functional ops take Python numbers), once per strong view.
LIMITS = {'ael': 4, 'cutmix': 1, 'fixmatch': 2, 'unimatch': 3}
OVERRIDES = {'ael': ['method.name=ael'], 'cutmix': ['method.name=cutmix'],
             'fixmatch': ['method.name=fixmatch'], 'unimatch': ['method.name=unimatch']}

def step_syncs(method: str, out) -> 'SyncCount':
    "The host synchronisations of the second step of a tiny run of `method` (the first fills ACM's queue)."
    # cpu96: `component_ids`'s reads are one per iteration, and how many its labels need depends on the teacher's
    # map; this tiny run of cpu96's network needs 1 (the cpu preset's 64-channel head: 6)
    torch.set_num_threads(1)
    cfg = get_config('cpu96', overrides=TINY + OVERRIDES[method] + ['optim.iters=3', 'run.log_interval=100',
                                                                     f'run.out={out}'])
    with setup(cfg) as run:
        run.step()
        lb, ub = next(run.loaders.labeled), next(run.loaders.unlabeled)   # rendered outside the count
        run.loaders.labeled, run.loaders.unlabeled = iter([lb]), iter([ub])
        with count_syncs(depth=3) as n: run.step()
    return n

@pytest.mark.parametrize('method', LIMITS)
def test_step_syncs(tmp_path, method):
    n = step_syncs(method, tmp_path)
    print(f"{method}: {n}")
    assert n.total <= LIMITS[method], f"{method}: {n}"

if __name__ == '__main__':                                             # the breakdown of every method
    import tempfile
    for m in LIMITS:
        with tempfile.TemporaryDirectory() as d: print(f"{m}: {step_syncs(m, d)}\n")

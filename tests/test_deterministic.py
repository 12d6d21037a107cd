"""`run.deterministic`: with it on, a training step runs no op that lacks a deterministic CUDA kernel (PyTorch's list,
`ael_nb.core.NONDETERMINISTIC_CUDA`, recorded on the CPU since only a GPU would raise), and two runs give the same
weights. The GPU half (same weights on one GPU type, resume bit-identical there) is `bench/paper_scale.py`'s."""
import pytest
import torch
from ael_nb.config import get_config
from ael_nb.core import cuda_nondeterministic_ops, set_deterministic
from ael_nb.plan import TINY
from ael_nb.train import setup, train

@pytest.fixture(autouse=True)
def restore():
    yield
    set_deterministic(False)                                           # the switch is global: leave it as found

def cfg(out, *extra):
    return get_config('cpu', overrides=TINY + [f'run.out={out}', *extra])

@pytest.mark.parametrize('method', ['ael', 'unimatch'])
def test_step_has_deterministic_cuda_kernels(tmp_path, method):
    "Off: the step resizes with `upsample_bilinear2d`, whose CUDA backward is nondeterministic; on: nothing on the list."
    found = {}
    for on in (False, True):
        torch.set_num_threads(1)
        with setup(cfg(tmp_path / str(on), f'method.name={method}', f'run.deterministic={on}')) as run:
            with cuda_nondeterministic_ops() as ops: run.step()
            assert torch.are_deterministic_algorithms_enabled() == on
        found[on] = dict(ops)
    assert found[False].get('upsample_bilinear2d_backward', 0) > 0, found[False]
    assert found[True] == {}, f"{method}, run.deterministic=true runs ops without a deterministic CUDA kernel: {found[True]}"

def test_two_runs_same_weights(tmp_path):
    torch.set_num_threads(1)
    runs = [train(cfg(tmp_path / str(i), 'method.name=ael', 'run.deterministic=true')) for i in range(2)]
    assert runs[0]['weights'] == runs[1]['weights'] and runs[0]['teacher_weights'] == runs[1]['teacher_weights']

def test_refuses_autotuning(tmp_path):
    with pytest.raises(ValueError, match='run.cudnn_benchmark=false'):
        setup(cfg(tmp_path, 'run.deterministic=true', 'run.cudnn_benchmark=true'))

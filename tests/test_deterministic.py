"""`run.deterministic`: with it on, a training step of every preset and method runs no op that lacks a deterministic
CUDA kernel (PyTorch's list, `ael_nb.core.NONDETERMINISTIC_CUDA`, recorded on the CPU since only a GPU would raise).
What the switch changes is shown to be needed: without each change the recorder finds the op a GPU would refuse.
The GPU half (same weights on one GPU type, resume bit-identical there) is `bench/paper_scale.py`'s."""
import re
import pytest
import torch
import ael_nb.cutmix, ael_nb.model
from ael_nb.config import PRESETS
from ael_nb.core import NONDETERMINISTIC_CUDA, cuda_nondeterministic_ops, set_deterministic
from ael_nb.train import setup
from tiny_presets import METHODS, tiny_config

# the aten ops whose CUDA kernel calls `alertNotDeterministic`, per torch version (read from its sources)
VERSIONS = {'2.14': {
    'avg_pool3d_backward', '_adaptive_avg_pool2d_backward', '_adaptive_avg_pool3d_backward', 'adaptive_max_pool2d_backward',
    'fractional_max_pool2d_backward', 'fractional_max_pool3d_backward', 'max_unpool2d', 'max_unpool3d',
    'upsample_linear1d_backward', 'upsample_bilinear2d_backward', '_upsample_bilinear2d_aa_backward',
    'upsample_bicubic2d_backward', '_upsample_bicubic2d_aa_backward', 'upsample_trilinear3d_backward',
    'reflection_pad1d_backward', 'reflection_pad2d_backward', 'reflection_pad3d_backward', '_ctc_loss_backward', 'histc',
    'grid_sampler_2d_backward', 'grid_sampler_3d_backward', 'put_', 'put', 'kthvalue', 'index_reduce',
    '_embedding_bag_backward', '_embedding_bag_dense_backward', 'nll_loss_forward', 'nll_loss2d_forward', 'bincount',
    'median', 'nanmedian', 'scatter_reduce', 'scatter', 'resize_'}}
# each entry of the docstring's "will throw a RuntimeError" list -> the ops that carry it
DOCUMENTED = {'AvgPool3d': ['avg_pool3d_backward'], 'AdaptiveAvgPool2d': ['_adaptive_avg_pool2d_backward'],
              'AdaptiveAvgPool3d': ['_adaptive_avg_pool3d_backward'], 'AdaptiveMaxPool2d': ['adaptive_max_pool2d_backward'],
              'FractionalMaxPool2d': ['fractional_max_pool2d_backward'],
              'FractionalMaxPool3d': ['fractional_max_pool3d_backward'], 'MaxUnpool1d': ['max_unpool2d'],
              'MaxUnpool2d': ['max_unpool2d'], 'MaxUnpool3d': ['max_unpool3d'],
              'interpolate': ['upsample_linear1d_backward', 'upsample_bilinear2d_backward', 'upsample_bicubic2d_backward',
                              'upsample_trilinear3d_backward'],
              'ReflectionPad1d': ['reflection_pad1d_backward'], 'ReflectionPad2d': ['reflection_pad2d_backward'],
              'ReflectionPad3d': ['reflection_pad3d_backward'], 'NLLLoss': ['nll_loss_forward', 'nll_loss2d_forward'],
              'CTCLoss': ['_ctc_loss_backward'], 'EmbeddingBag': ['_embedding_bag_backward'], 'put_': ['put_'],
              'histc': ['histc'], 'bincount': ['bincount'], 'median': ['median'],
              'grid_sample': ['grid_sampler_2d_backward', 'grid_sampler_3d_backward'],
              'scatter_reduce': ['scatter_reduce'], 'resize_': ['resize_']}

@pytest.fixture(autouse=True)
def restore():
    yield
    set_deterministic(False)                                           # the switch is global: leave it as found

def test_list_is_this_versions():
    version = '.'.join(torch.__version__.split('.')[:2])
    assert version in VERSIONS, f"torch {version}: read its alertNotDeterministic calls into VERSIONS and NONDETERMINISTIC_CUDA"
    assert set(NONDETERMINISTIC_CUDA) == VERSIONS[version]

def test_list_covers_the_docstring():
    "Every op `torch.use_deterministic_algorithms` says will raise is on the list (a new one fails here)."
    doc = torch.use_deterministic_algorithms.__doc__
    raising = doc[doc.index('operations will throw a'):doc.index('In addition')]
    names = re.findall(r'^\s*\* :\w+:`torch\.(?:[\w.]+\.)?(\w+)`', raising, re.M)
    assert len(names) > 20, raising
    assert not set(names) - set(DOCUMENTED), f"not mapped to aten ops: {set(names) - set(DOCUMENTED)}"
    assert {op for n in names for op in DOCUMENTED[n]} <= set(NONDETERMINISTIC_CUDA)

def test_ohem_threshold_is_kthvalues():
    "OHEM's `topk` threshold is `kthvalue`'s value, with ties and ignored pixels (+inf)."
    g = torch.Generator().manual_seed(0)
    for k in (1, 5, 64, 250, 300):
        v = (torch.randint(0, 4, (300,), generator=g) / 3).float()
        v[torch.randperm(300, generator=g)[:50]] = torch.inf
        assert v.topk(k, largest=False, sorted=False).values.max() == v.kthvalue(k).values

def recorded(preset, method, out, on: bool = True, *extra) -> dict:
    "The ops of a tiny run's second step that would raise on a GPU under `run.deterministic=on` (and `extra` overrides)."
    torch.set_num_threads(1)
    with setup(tiny_config(preset, method, out, f'run.deterministic={on}', *extra)) as run:
        run.step()
        with cuda_nondeterministic_ops() as ops: run.step()
        assert torch.are_deterministic_algorithms_enabled() == on
    return dict(ops)

CASES = [(p, None) for p in PRESETS] + [('cpu', m) for m in METHODS]

@pytest.mark.parametrize('preset,method', CASES)
def test_step_has_deterministic_cuda_kernels(tmp_path, preset, method):
    "`ael-train --preset P run.deterministic=true` would not raise on a GPU: no op of its step lacks a CUDA kernel."
    assert recorded(preset, method, tmp_path) == {}, f"{preset} {method}: ops without a deterministic CUDA kernel"

def test_without_the_switch_the_check_fails(tmp_path):
    "Off, the step resizes with `upsample_bilinear2d` and hooks ACM's labels with `scatter_reduce` 'amax'."
    ops = recorded('cityscapes', 'ael', tmp_path, on=False)
    assert ops.get('upsample_bilinear2d_backward', 0) > 0 and ops.get('scatter_reduce', 0) > 0, ops

def test_each_change_is_needed(tmp_path, monkeypatch):
    "On, but with the model's interpolation or the region search's hook as when off: the recorder finds each."
    real = ael_nb.model.resize_bilinear
    monkeypatch.setattr(ael_nb.model, 'resize_bilinear', lambda x, size, deterministic=False, align_corners=False: real(x, size, False, align_corners))
    assert 'upsample_bilinear2d_backward' in recorded('cityscapes', 'ael', tmp_path / 'a')
    monkeypatch.undo()
    monkeypatch.setattr(ael_nb.cutmix, '_hook', lambda parent, lab, nb: parent.scatter_reduce_(0, lab.long(), nb, 'amax'))
    assert set(recorded('cityscapes', 'ael', tmp_path / 'b')) == {'scatter_reduce'}

def test_dinov2_step_has_deterministic_cuda_kernels(tmp_path):
    "UniMatch V2's network (DINOv2 + DPT) at a 2x3 patch grid: on, no op lacks a kernel; off, its resizes' backwards do."
    dino = ('model.backbone=dinov2_tiny', 'data.crop_size=28,42')
    assert recorded('cpu', 'ael', tmp_path / 'on', True, *dino) == {}
    off = recorded('cpu', 'ael', tmp_path / 'off', False, *dino)
    assert {'upsample_bilinear2d_backward', 'upsample_bicubic2d_backward'} <= set(off), off

def test_bilinear_path_matches_interpolate():
    "The switch's resize (two matrix products) gives `F.interpolate`'s values and gradients, to rounding."
    x = torch.randn(2, 3, 7, 9, dtype=torch.float64, requires_grad=True)
    a = ael_nb.model.resize_bilinear(x, (15, 20), True); ga, = torch.autograd.grad(a.square().sum(), x)
    b = ael_nb.model.resize_bilinear(x, (15, 20), False); gb, = torch.autograd.grad(b.square().sum(), x)
    torch.testing.assert_close(a, b); torch.testing.assert_close(ga, gb)
    with cuda_nondeterministic_ops() as ops: ael_nb.model.resize_bilinear(x, (15, 20), True).sum().backward()
    assert dict(ops) == {}

def test_refuses_autotuning(tmp_path):
    with pytest.raises(ValueError, match='run.cudnn_benchmark=false'):
        setup(tiny_config('cpu', None, tmp_path, 'run.deterministic=true', 'run.cudnn_benchmark=true'))

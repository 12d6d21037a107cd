"""Released models of UniMatch V2 and UniMatch V1, read by the kit: `tests/golden/released_<codebase>.json` holds the
logits each codebase's OWN model code gave (`tools/released_golden.py`, run from their checkouts) on a checkpoint it
saved, with the keys and shapes of that checkpoint; here the same checkpoint is rebuilt from those keys and the seed,
saved as the codebase saves it, loaded by `released_model` and the kit's logits must match. A wrong or foreign
checkpoint gets one line saying what it holds."""
import importlib.util, json
from pathlib import Path
import pytest
import torch
import ael_nb.released as released
from ael_nb.core import DataError
from ael_nb.dpt import DPT
from ael_nb.plan import TINY

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location('released_golden', ROOT / 'tools' / 'released_golden.py')
rg = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(rg)
GOLDEN = {c: json.loads(rg.golden_path(c).read_text()) for c in ('unimatch_v2', 'unimatch')}
COMMITS = dict(unimatch_v2='f6afb4dfca2d9dcbcee2307e97717954ca75c0ba', unimatch='0324f3dd4a22128105a5eb135d2586c0bb3cc647')
CASES = [(codebase, name) for codebase, name, *_ in rg.CASES]


def case(codebase, name): return GOLDEN[codebase]['cases'][name]


def test_golden_files_name_the_commits_and_hold_the_codebases_layouts():
    for codebase, g in GOLDEN.items():
        assert g['commit'] == COMMITS[codebase] and g['made_by'] == 'tools/released_golden.py'
    assert [(c, n) for c in GOLDEN for n in GOLDEN[c]['cases']] == CASES
    v2, v1 = case('unimatch_v2', 'dinov2_s_voc'), case('unimatch', 'resnet50_os16')
    v2_keys, v1_keys = dict((k, s) for k, s, _ in v2['keys']), dict((k, s) for k, s, _ in v1['keys'])
    # V2 stores DINOv2's mask token and an unused skip unit; V1's ASPP, fuse and 3x3 stem under its own names
    assert v2_keys['backbone.pos_embed'] == [1, 1370, 384] and 'backbone.mask_token' in v2_keys
    assert any(k.startswith('head.scratch.refinenet4.resConfUnit1.') for k in v2_keys)
    assert {'head.b4.gap.1.weight', 'fuse.3.weight', 'backbone.conv1.6.weight'} <= set(v1_keys)
    assert v1_keys['fuse.0.weight'] == [256, 304, 3, 3] and len(v1_keys) == len(case('unimatch', 'resnet50_os8')['keys'])
    assert v2['logits']['shape'] == [1, 5, 98, 140] and v1['logits']['shape'] == [1, 5, 65, 97]


@pytest.mark.parametrize('codebase,name', CASES)
def test_kit_logits_equal_the_codebases(codebase, name, tmp_path):
    torch.set_num_threads(1)
    c = case(codebase, name)
    diff = rg.differ(rg.kit_logits(codebase, c['keys'], c['inputs'], tmp_path), c['logits'], c['rtol'])
    assert not diff, f"{codebase} {name} ({c['what']}): " + '; '.join(diff[:5])


def test_the_figures_tell_v1s_resize_and_channel_order_apart(tmp_path, monkeypatch):
    "Half-pixel upsampling, or V1's fusing conv left in its own channel order, misses V1's logits."
    torch.set_num_threads(1)
    c = case('unimatch', 'resnet50_os16')
    kit = lambda: rg.differ(rg.kit_logits('unimatch', c['keys'], c['inputs'], tmp_path), c['logits'], c['rtol'])
    built = released.DeepLabV3Plus
    monkeypatch.setattr(released, 'DeepLabV3Plus', lambda *a, **k: built(*a, **{**k, 'align_corners': False}))
    assert kit()
    monkeypatch.setattr(released, 'DeepLabV3Plus', built)
    to_kit = released.v1_to_kit
    monkeypatch.setattr(released, 'v1_to_kit', lambda sd: {**to_kit(sd), 'decoder.0.0.weight': sd['fuse.0.weight']})
    assert kit()


@pytest.mark.parametrize('codebase,name', [('unimatch_v2', 'dinov2_s_voc'), ('unimatch', 'resnet50_os16')])
def test_to_released_writes_the_keys_shapes_and_dtypes_of_the_codebases_own_network(codebase, name):
    "What `to_released` writes is, key for key, the state dict the codebase's own model code has (its strict load fits)."
    from ael_nb.model import DeepLabV3Plus
    net = (DPT(rg.NUM_CLASSES, 'dinov2_s') if codebase == 'unimatch_v2' else
           DeepLabV3Plus(rg.NUM_CLASSES, 'resnet50', 16, deep_stem=True, align_corners=True))
    ck = released.to_released(net, codebase)
    got = {k.removeprefix('module.'): [list(v.shape), str(v.dtype)] for k, v in ck['model'].items()}
    assert got == {k: [s, d] for k, s, d in case(codebase, name)['keys']}


@pytest.mark.parametrize('output_stride', [8, 16])
def test_a_deep_stem_resnets_layer1_is_undilated(output_stride):
    "V1's ResNet (and torchvision's) dilates layer3/layer4 only; the kit's 3x3 stem rebuilds layer1, at dilation 1."
    from ael_nb.model import resnet_backbone
    net = resnet_backbone('resnet50', output_stride, deep_stem=True)
    dil = lambda layer: sorted({m.dilation[0] for m in layer.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (3, 3)})
    assert (dil(net.layer1), dil(net.layer2), dil(net.layer4)) == ([1], [1], [2, 4] if output_stride == 8 else [1, 2])


def test_the_figures_tell_another_seed_apart(tmp_path):
    c = case('unimatch_v2', 'dinov2_s_voc')
    assert rg.differ(rg.kit_logits('unimatch_v2', c['keys'], {**c['inputs'], 'seed': 7}, tmp_path), c['logits'], c['rtol'])


# ---------------------------------------------------------------- what a file holds, in one line
def v2_file(path, classes=10, arch='dinov2_tiny', wrap=lambda sd: {'model': sd}):
    "A V2-layout checkpoint (the kit's DPT's names are V2's), under DDP's `module.` prefix."
    torch.save(wrap({f'module.{k}': v for k, v in DPT(classes, arch).state_dict().items()}), path)
    return path

def v1_file(path, codebase='unimatch'):
    "A V1-layout checkpoint of 10 classes with the golden file's keys (a ResNet-50 DeepLabv3+), as V1 saves it."
    return rg.save_like(codebase, rg.fill(case('unimatch', 'resnet50_os16')['keys'], 0), path)


def test_a_wrong_codebase_or_foreign_file_is_one_line(tmp_path):
    for path, codebase, says in [
        (v2_file(tmp_path / 'v2.pth'), 'unimatch', "holds UniMatch V2's DINOv2 + DPT on dinov2_tiny, 10 classes, not "
                                                   "UniMatch V1's model; it is for --from unimatch_v2"),
        (v1_file(tmp_path / 'v1.pth'), 'unimatch_v2', "holds UniMatch V1's DeepLabv3+ on resnet50, 5 classes, not "
                                                      "UniMatch V2's model; it is for --from unimatch"),
    ]:
        with pytest.raises(DataError) as e: released.released_model(path, codebase)
        assert e.value.problem == says and '\n' not in str(e.value)
    torch.save({'model_state': {'module.encoder.layer3.0.conv1.weight': torch.zeros(1),
                                'module.decoder.classifier.4.weight': torch.zeros(19, 256, 1, 1)}}, tmp_path / 'u2pl.pth')
    with pytest.raises(DataError, match=r"holds U2PL's model on a ResNet with 1 blocks in layer3, 19 classes; U2PL's decoder"):
        released.released_model(tmp_path / 'u2pl.pth', 'u2pl')
    torch.save({'fc.weight': torch.zeros(2, 2)}, tmp_path / 'other.pth')
    with pytest.raises(DataError, match=r"holds 1 tensors in no layout of UniMatch V2, UniMatch V1, U2PL \(keys fc.weight"):
        released.released_model(tmp_path / 'other.pth', 'unimatch')
    torch.save({'epoch': 3}, tmp_path / 'empty.pth')
    with pytest.raises(DataError, match='holds no network'): released.released_model(tmp_path / 'empty.pth', 'unimatch')


def test_a_file_that_does_not_fit_its_layout_says_what_is_missing(tmp_path):
    sd = {k: v for k, v in DPT(3, 'dinov2_tiny').state_dict().items() if 'output_conv.0' not in k}
    torch.save(sd, tmp_path / 'cut.pth')
    with pytest.raises(DataError, match=r"holds UniMatch V2's DINOv2 \+ DPT on dinov2_tiny, 3 classes but does not fit it: "
                                        r"2 weights missing \(head.scratch.output_conv.0.weight"):
        released.released_model(tmp_path / 'cut.pth', 'unimatch_v2')


def inproc(capsys, fn, *args):
    try: rc = fn([str(a) for a in args])
    except SystemExit as e: rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_ael_eval_from_scores_a_released_model_with_per_class_iou(capsys, tmp_path):
    from ael_nb.cli import ael_eval
    torch.set_num_threads(1)
    rc, out, err = inproc(capsys, ael_eval, v2_file(tmp_path / 'v2.pth'), '--from', 'unimatch_v2', '--dataset', 'synthetic',
                          '--max-images', 2, '--json', tmp_path / 's.json')
    assert rc == 0, err
    first = out.splitlines()[0]
    assert first.startswith(f"{tmp_path / 'v2.pth'}: UniMatch V2's DINOv2 + DPT on dinov2_tiny, 10 classes, whole evaluation "
                            "on synthetic val (2 images"), first
    s = json.loads((tmp_path / 's.json').read_text())
    assert 'protocol unimatch_v2: UniMatch V2 supervised.evaluate, multiple 14\n' in out, out
    assert len(s['per_class']) == 10 and (s['protocol'], s['mode']) == ('unimatch_v2', 'whole') and all(f'| {n} |' in out for n in s['per_class'])


def test_ael_eval_from_refuses_before_evaluating(capsys, tmp_path):
    from ael_nb.cli import ael_eval
    v2 = v2_file(tmp_path / 'v2.pth', classes=4)
    rc, out, err = inproc(capsys, ael_eval, v2, '--from', 'unimatch_v2', '--dataset', 'synthetic')
    assert rc == 2 and not out and err.count('\n') == 1
    assert "checkpoint predicts 4 classes (UniMatch V2's model), dataset 'synthetic' has 10" in err
    rc, out, err = inproc(capsys, ael_eval, v2, '--from', 'unimatch', '--dataset', 'synthetic')
    assert rc == 2 and not out and err.count('\n') == 1 and 'it is for --from unimatch_v2' in err
    rc, out, err = inproc(capsys, ael_eval, v2, '--from', 'unimatch_v2')
    assert rc == 2 and err.count('\n') == 1 and '--from unimatch_v2 needs --dataset' in err


def test_a_released_model_given_as_a_resnet_backbone_is_one_line(capsys, tmp_path):
    "A V2 model as `model.pretrained` of the ResNet-18 cpu preset: what it holds, before step 1."
    from ael_nb.cli import ael_train
    v2 = v2_file(tmp_path / 'v2.pth', wrap=lambda sd: sd)
    rc, out, err = inproc(capsys, ael_train, '--preset', 'cpu', f'model.pretrained={v2}', *TINY, f'run.out={tmp_path / "runs"}')
    assert rc == 2 and err.count('\n') == 1, err
    assert (f"{v2}: holds a whole model, UniMatch V2's DINOv2 + DPT on dinov2_tiny, 10 classes, not weights for "
            "model.backbone=resnet18: evaluate it with ael-eval v2.pth --from unimatch_v2, or train on its backbone "
            "with model.backbone=dinov2_tiny") in err

"""The kit's evaluation protocols against each codebase's own evaluation function: `tests/golden/eval_<protocol>.json`
holds the confusion matrices that SemiSeg-AEL's `eval.py`, UniMatch V2's and V1's `evaluate` and U2PL's `eval.py`
gave on seeded images with a seeded tiny network (written by `tools/eval_golden.py` from their checkouts); here the
kit recomputes each case with `predict` under that protocol and must give the same matrix, pixel for pixel. Each case
also misses its figures when one of its protocol's rules (stride, alignment, resize, padding, window placement,
scores) is changed. With `AEL_AUTHORS_REPO`, `UNIMATCH_V2_REPO`, `UNIMATCH_REPO` or `U2PL_REPO` set to a checkout,
that codebase's figures are also regenerated from its code and compared with the stored."""
import importlib.util, json, os
from pathlib import Path
import pytest
import torch
from ael_nb.evaluate import PROTOCOL, scaled_size

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location('eval_golden', ROOT/'tools'/'eval_golden.py')
eg = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(eg)
GOLDEN = {p: json.loads((eg.GOLDEN_DIR/f'eval_{p}.json').read_text()) for p in eg.REPOS}
COMMITS = dict(ael='747c7972a1aed589a8a62cdd98c3d1836c609735', unimatch_v2='f6afb4dfca2d9dcbcee2307e97717954ca75c0ba',
               unimatch='0324f3dd4a22128105a5eb135d2586c0bb3cc647', u2pl='ab3d2be313d4d6b2885e7a0213d4fce82a803b79')
REPO_ENV = dict(ael='AEL_AUTHORS_REPO', unimatch_v2='UNIMATCH_V2_REPO', unimatch='UNIMATCH_REPO', u2pl='U2PL_REPO')

def golden(case):
    protocol, function, inputs = eg.CASES[case]
    return GOLDEN[protocol]['cases'][case]


def test_golden_files_name_each_commit_and_cover_every_case():
    for protocol, fig in GOLDEN.items():
        assert (fig['codebase'], fig['commit']) == (eg.REPOS[protocol], COMMITS[protocol]) and fig['made_on']
        assert list(fig['cases']) == [c for c, (p, *_) in eg.CASES.items() if p == protocol]
    for case, (protocol, function, inputs) in eg.CASES.items():
        assert (golden(case)['function'], golden(case)['inputs']) == (function, eg.plain(inputs)), case


def test_the_cases_hold_a_small_image_sides_off_the_stride_and_several_scales():
    "The images the golden cases predict include what the protocols treat specially."
    for case, (protocol, function, inputs) in eg.CASES.items():
        if inputs['mode'] != 'sliding': continue
        sizes = [scaled_size(hw, s, inputs['base_size']) for hw, _ in inputs['shapes'] for s in inputs['scales']]
        assert any(min(hw) < inputs['window'][0] for hw in sizes), case
        assert any((side - inputs['window'][0]) % inputs['stride'][0] for hw in sizes for side in hw), case
    assert {p for p, _, i in eg.CASES.values() if len(i['scales']) > 1} == {'ael', 'u2pl'}   # the codes with scales
    assert {(p, i['mode']) for p, _, i in eg.CASES.values()} >= {('ael', 'sliding'), ('ael', 'whole'),
        ('unimatch_v2', 'sliding'), ('unimatch_v2', 'whole'), ('unimatch', 'sliding'), ('u2pl', 'sliding')}


@pytest.mark.parametrize('case', list(eg.CASES))
def test_kit_matches_the_codebase(case):
    torch.set_num_threads(1)
    protocol, _, inputs = eg.CASES[case]
    theirs = golden(case)['codebase']
    ours = eg.kit(inputs, protocol)
    assert ours.sum() > 0 and (ours.sum(0) > 0).sum() > 3, 'the network predicts several classes'
    assert ours.tolist() == theirs['confusion'], f"{case}: {int((ours != torch.tensor(theirs['confusion'])).sum())} cells differ"
    if 'iou' in theirs:   # UniMatch reports per-class IoU (%) itself: the same from the kit's matrix
        d = ours.diag().double()
        iou = 100 * d / (ours.sum(0) + ours.sum(1) - d + 1e-10)
        assert torch.allclose(iou, torch.tensor(theirs['iou'], dtype=torch.double), atol=1e-9), case


def _flip(field):
    "The other value of a `Protocol` field."
    return dict(align_corners=lambda v: not v, pad=lambda v: 'end' if v != 'end' else 'centre',
                windows=lambda v: 'edge' if v != 'edge' else 'v1',
                window_scores=lambda v: 'logits' if v == 'softmax' else 'softmax',
                whole_scores=lambda v: 'logits' if v == 'softmax' else 'softmax')[field]

# (case, what changes): a field of the protocol, or one of the inputs the presets set (stride, base_size, multiple)
CHANGES = [
    ('ael_city_multiscale', 'align_corners'), ('ael_city_multiscale', 'pad'), ('ael_city_multiscale', 'windows'),
    ('ael_city_multiscale', 'window_scores'), ('ael_city_multiscale', 'stride=64'), ('ael_city', 'base_size=None'),
    ('ael_city', 'stride=64'), ('ael_voc_multiscale', 'align_corners'), ('ael_voc_multiscale', 'whole_scores'),
    ('unimatch_v2_sliding', 'stride=65'), ('unimatch_v2_sliding', 'windows'), ('unimatch_v2_sliding', 'pad'),
    ('unimatch_v2_original', 'align_corners'), ('unimatch_v2_original', 'multiple=None'),
    ('unimatch_v2_original', 'whole_scores'), ('unimatch_sliding', 'stride=65'), ('unimatch_sliding', 'windows'),
    ('unimatch_original', 'multiple=14'), ('u2pl_city_multiscale', 'window_scores'),
    ('u2pl_city_multiscale', 'align_corners'), ('u2pl_city_multiscale', 'stride=64'),
    ('u2pl_city_multiscale', 'base_size=None'), ('u2pl_voc', 'whole_scores'),
]

@pytest.mark.parametrize('case,change', CHANGES)
def test_a_changed_rule_misses_the_codebase(case, change):
    "The figures tell each rule apart: the protocol with one stride, alignment, resize or placement changed misses them."
    torch.set_num_threads(1)
    protocol, _, inputs = eg.CASES[case]
    inputs, fields = dict(inputs), {}
    if '=' in change:
        key, value = change.split('=')
        inputs[key] = None if value == 'None' else (int(value),) * 2 if key == 'stride' else int(value)
    else: fields[change] = _flip(change)(getattr(PROTOCOL[protocol], change))
    assert eg.kit(inputs, protocol, **fields).tolist() != golden(case)['codebase']['confusion']


@pytest.mark.parametrize('protocol', list(eg.REPOS))
def test_figures_regenerate_from_the_codebase(protocol):
    repo = os.environ.get(REPO_ENV[protocol])
    if not repo: pytest.skip(f"set {REPO_ENV[protocol]} to a {eg.REPOS[protocol]} checkout to regenerate its figures")
    torch.set_num_threads(1)
    for case, (p, function, inputs) in eg.CASES.items():
        if p == protocol: assert eg.CODEBASE[protocol](Path(repo), inputs, function) == golden(case)['codebase'], case

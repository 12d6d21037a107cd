"""Meta's DINOv2 weights into the DPT's ViT: a fake file with the official key names (tiny sizes) lands in the right
parameters, a V2 checkpoint's backbone loads past its head, `auto` takes the file from the torch hub cache or downloads
it, a kit run of the DPT reloads for evaluation, and a missing key, a foreign key, a missing file and an offline
`auto` each say so in one line naming the file."""
import functools, http.server, threading
import pytest
import torch
import ael_nb.model as model_mod
from ael_nb.core import DataError
from ael_nb.dpt import DINOV2
from ael_nb.model import build_model, dinov2_file

DIM, DEPTH = 32, 4   # dinov2_tiny


def official(seed: int = 0) -> dict:
    "A state dict under the key names and layouts of Meta's dinov2_vit*14_pretrain.pth, at the tiny size."
    g = torch.Generator().manual_seed(seed)
    shapes = dict(cls_token=(1, 1, DIM), pos_embed=(1, 1 + 37 * 37, DIM), mask_token=(1, DIM),
                  **{'patch_embed.proj.weight': (DIM, 3, 14, 14), 'patch_embed.proj.bias': (DIM,)})
    for i in range(DEPTH):
        b = f'blocks.{i}.'
        shapes.update({b + 'norm1.weight': (DIM,), b + 'norm1.bias': (DIM,), b + 'attn.qkv.weight': (3 * DIM, DIM),
                       b + 'attn.qkv.bias': (3 * DIM,), b + 'attn.proj.weight': (DIM, DIM), b + 'attn.proj.bias': (DIM,),
                       b + 'ls1.gamma': (DIM,), b + 'norm2.weight': (DIM,), b + 'norm2.bias': (DIM,),
                       b + 'mlp.fc1.weight': (4 * DIM, DIM), b + 'mlp.fc1.bias': (4 * DIM,),
                       b + 'mlp.fc2.weight': (DIM, 4 * DIM), b + 'mlp.fc2.bias': (DIM,), b + 'ls2.gamma': (DIM,)})
    shapes.update({'norm.weight': (DIM,), 'norm.bias': (DIM,)})
    return {k: torch.randn(s, generator=g) for k, s in shapes.items()}


def test_official_keys_land_in_the_right_parameters(tmp_path):
    sd = official(); torch.save(sd, tmp_path/'dinov2_tiny.pth')
    m = build_model(3, 'dinov2_tiny', pretrained=tmp_path/'dinov2_tiny.pth')
    vit = m.backbone
    pairs = [(vit.cls_token, 'cls_token'), (vit.pos_embed, 'pos_embed'), (vit.patch_embed.proj.weight,
             'patch_embed.proj.weight'), (vit.blocks[2].attn.qkv.weight, 'blocks.2.attn.qkv.weight'),
             (vit.blocks[3].ls1.gamma, 'blocks.3.ls1.gamma'), (vit.blocks[1].mlp.fc2.bias, 'blocks.1.mlp.fc2.bias'),
             (vit.blocks[0].norm2.weight, 'blocks.0.norm2.weight'), (vit.norm.bias, 'norm.bias')]
    for p, k in pairs: assert torch.equal(p.detach(), sd[k]), k
    assert len(vit.state_dict()) == len(sd) - 1                              # all but mask_token
    assert all(torch.equal(v, sd[k]) for k, v in vit.state_dict().items())


def test_a_v2_checkpoint_loads_its_backbone_past_its_head(tmp_path):
    sd = official(1)
    head = build_model(3, 'dinov2_tiny').head.state_dict()
    torch.save({'model': {**{f'module.backbone.{k}': v for k, v in sd.items()},
                          **{f'module.head.{k}': v for k, v in head.items()}}, 'epoch': 3}, tmp_path/'v2.pth')
    m = build_model(3, 'dinov2_tiny', pretrained=tmp_path/'v2.pth')
    assert torch.equal(m.backbone.blocks[1].attn.proj.weight.detach(), sd['blocks.1.attn.proj.weight'])


@pytest.mark.parametrize('change,says', [
    (lambda sd: sd.pop('blocks.3.ls2.gamma'), '1 of its weights are missing (blocks.3.ls2.gamma)'),
    (lambda sd: sd.update(register_tokens=torch.zeros(1, 4, DIM)), "1 keys are not the ViT's (register_tokens)"),
    (lambda sd: sd.update({'blocks.4.norm1.weight': torch.ones(DIM)}), "1 keys are not the ViT's (blocks.4.norm1.weight)"),
    (lambda sd: sd.update(pos_embed=torch.zeros(1, 1 + 16 * 16, DIM)), 'pos_embed (1, 257, 32) vs model (1, 1370, 32)'),
])
def test_a_file_that_does_not_fit_is_one_line_naming_it(tmp_path, change, says):
    sd = official(); change(sd); torch.save(sd, tmp_path/'bad.pth')
    with pytest.raises(DataError) as e: build_model(3, 'dinov2_tiny', pretrained=tmp_path/'bad.pth')
    msg = str(e.value)
    assert str(tmp_path/'bad.pth') in msg and says in msg and '\n' not in msg, msg


def test_a_missing_file_says_what_to_download(tmp_path, monkeypatch):
    monkeypatch.setenv('TORCH_HOME', str(tmp_path/'home'))
    with pytest.raises(DataError) as e, torch.device('meta'):                 # ViT-S, nothing allocated
        build_model(3, 'dinov2_s', pretrained=tmp_path/'nowhere.pth')
    msg = str(e.value)
    assert '\n' not in msg and str(tmp_path/'nowhere.pth') in msg and 'no such checkpoint file' in msg, msg
    assert 'https://dl.fbaipublicfiles.com/dinov2/dinov2_vits14/dinov2_vits14_pretrain.pth' in msg
    assert str(tmp_path/'home'/'hub'/'checkpoints'/'dinov2_vits14_pretrain.pth') in msg


@pytest.fixture
def tiny_published(tmp_path, monkeypatch):
    "dinov2_tiny with a download address on this machine's loopback, and an empty TORCH_HOME; yields the served file."
    (tmp_path/'www').mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path/'www'))
    handler.log_message = lambda *a: None
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f'http://127.0.0.1:{srv.server_port}/dinov2_vitt14_pretrain.pth'
    monkeypatch.setitem(DINOV2, 'dinov2_tiny', DINOV2['dinov2_tiny']._replace(url=url))
    monkeypatch.setenv('TORCH_HOME', str(tmp_path/'home'))
    yield tmp_path/'www'/'dinov2_vitt14_pretrain.pth'
    srv.shutdown(); srv.server_close()


def test_auto_takes_the_cached_file_offline(tiny_published, monkeypatch, capsys):
    monkeypatch.setenv('AEL_OFFLINE', '1')
    m = build_model(3, 'dinov2_tiny', pretrained='auto')                     # not cached: one line, from scratch
    out = capsys.readouterr().out
    assert out.count('\n') == 1 and 'trains from scratch' in out and 'AEL_OFFLINE' in out, out
    assert DINOV2['dinov2_tiny'].url in out and str(dinov2_file('dinov2_tiny')) in out
    sd = official(); dinov2_file('dinov2_tiny').parent.mkdir(parents=True); torch.save(sd, dinov2_file('dinov2_tiny'))
    m = build_model(3, 'dinov2_tiny', pretrained='auto')
    assert torch.equal(m.backbone.pos_embed.detach(), sd['pos_embed']) and capsys.readouterr().out == ''


def test_auto_downloads_into_the_cache(tiny_published, monkeypatch, capsys):
    monkeypatch.delenv('AEL_OFFLINE', raising=False)
    sd = official(2); torch.save(sd, tiny_published)
    m = build_model(3, 'dinov2_tiny', pretrained='auto')
    assert torch.equal(m.backbone.norm.weight.detach(), sd['norm.weight']) and capsys.readouterr().out == ''
    assert dinov2_file('dinov2_tiny').is_file()


def test_the_test_size_has_no_published_weights(monkeypatch, capsys):
    monkeypatch.setenv('AEL_OFFLINE', '1')
    build_model(3, 'dinov2_tiny', pretrained='auto')
    out = capsys.readouterr().out
    assert out.count('\n') == 1 and 'Meta publishes no weights for this test size' in out, out
    assert model_mod.DINOV2['dinov2_tiny'].url is None


def test_a_kit_run_of_the_dpt_reloads_for_evaluation_and_as_pretrained(tmp_path):
    "A DINOv2 run's best.pth: `load_model` (ael-eval's path) rebuilds the DPT with its weights; as model.pretrained its "
    "ViT fills a new model's backbone, its DPT head left aside."
    from tiny_presets import tiny_config
    from ael_nb.state import load_model, read_checkpoint
    from ael_nb.train import train
    train(tiny_config('cpu', 'supervised', tmp_path, 'model.backbone=dinov2_tiny', 'data.crop_size=28,42'))
    m, info, cfg, which = load_model(tmp_path/'best.pth')
    stored = read_checkpoint(tmp_path/'best.pth')[which]
    assert type(m).__name__ == 'DPT' and m.arch == 'dinov2_tiny' and cfg.model.backbone == 'dinov2_tiny'
    assert all(torch.equal(v, stored[k]) for k, v in m.state_dict().items())
    fresh = build_model(info.num_classes, 'dinov2_tiny', pretrained=tmp_path/'best.pth')
    assert torch.equal(fresh.backbone.blocks[3].mlp.fc1.weight, m.backbone.blocks[3].mlp.fc1.weight)
    assert not torch.equal(fresh.head.scratch.output_conv[2].weight, m.head.scratch.output_conv[2].weight)

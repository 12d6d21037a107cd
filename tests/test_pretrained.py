"""`model.pretrained=auto`: torchvision's ImageNet weights downloaded into the torch cache, their hash prefix checked,
and loaded; a file that fails the check is refused; offline, one line and training from scratch."""
import functools, hashlib, http.server, threading, time
import pytest
import torch
from torchvision.models import resnet
import ael_nb.model as model_mod
from ael_nb.model import build_model, fetch_command


def digest(sd: dict) -> str:
    "SHA-256 of a state dict's tensors in key order, torchvision's `fc.*` left out (the kit's backbone has none)."
    h = hashlib.sha256()
    for k in sorted(k for k in sd if not k.startswith('fc.') and not k.endswith('num_batches_tracked')):
        h.update(k.encode()); h.update(sd[k].detach().contiguous().numpy().tobytes())
    return h.hexdigest()


@pytest.fixture(autouse=True)
def online(monkeypatch):
    "These tests serve the weights on this machine's loopback: the kit may look for them (CI sets AEL_OFFLINE)."
    monkeypatch.delenv('AEL_OFFLINE', raising=False)


@pytest.fixture
def served(tmp_path, monkeypatch):
    "A local HTTP server of tmp_path/www and an empty TORCH_HOME; yields a function pointing the ImageNet URL at a file there."
    (tmp_path / 'www').mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / 'www'))
    handler.log_message = lambda *a: None
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'home'))
    def point_at(name):
        monkeypatch.setattr(model_mod, 'imagenet_url', lambda backbone: f'http://127.0.0.1:{srv.server_port}/{name}')
    yield point_at
    srv.shutdown(); srv.server_close()


def test_auto_downloads_checks_and_loads(tmp_path, served, capsys):
    weights = resnet.resnet18(weights=None).state_dict()                # random weights in torchvision's layout
    torch.save(weights, tmp_path / 'w.pth')
    sha = hashlib.sha256((tmp_path / 'w.pth').read_bytes()).hexdigest()
    name = f'resnet18-{sha[:8]}.pth'                                    # torchvision's naming: the hash prefix in the name
    (tmp_path / 'w.pth').rename(tmp_path / 'www' / name); served(name)
    m = build_model(3, 'resnet18', pretrained='auto')
    assert digest(m.backbone.state_dict()) == digest(weights)
    assert (tmp_path / 'home' / 'hub' / 'checkpoints' / name).is_file()  # where torchvision looks for it next time
    assert capsys.readouterr().out == ''


def test_auto_refuses_a_file_whose_hash_disagrees(tmp_path, served, capsys):
    weights = resnet.resnet18(weights=None).state_dict()
    torch.save(weights, tmp_path / 'www' / 'resnet18-00000000.pth'); served('resnet18-00000000.pth')
    m = build_model(3, 'resnet18', pretrained='auto')
    out = capsys.readouterr().out
    assert out.count('\n') == 1 and 'trains from scratch' in out and 'invalid hash value' in out, out
    assert digest(m.backbone.state_dict()) != digest(weights)
    assert not (tmp_path / 'home' / 'hub' / 'checkpoints' / 'resnet18-00000000.pth').exists()


def test_auto_offline_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    "Nothing listens on the port: the fallback is one line naming the missing file and the command that fetches it."
    import socket
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]   # a free port, closed
    monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'home'))
    monkeypatch.setattr(model_mod, 'imagenet_url', lambda backbone: f'http://127.0.0.1:{port}/resnet18-f37072fd.pth')
    build_model(3, 'resnet18', pretrained='auto')
    out = capsys.readouterr().out
    cached = tmp_path / 'home' / 'hub' / 'checkpoints' / 'resnet18-f37072fd.pth'
    assert out == (f"model.pretrained=auto: the resnet18 backbone trains from scratch: {cached} is missing and 127.0.0.1 is "
                   f"out of reach; to start from ImageNet, fetch the weights once with: {fetch_command('resnet18')}\n")
    assert fetch_command('resnet18') == "python -c \"import torchvision; torchvision.models.resnet18(weights='IMAGENET1K_V1')\""


def test_fetch_command_names_real_weights():
    "The command's function and weights name exist in this torchvision (it is not run: no network here)."
    import torchvision
    for backbone in model_mod.IMAGENET_WEIGHTS:
        assert callable(getattr(torchvision.models, backbone))
        weights = torchvision.models.get_weight(f"{model_mod.IMAGENET_WEIGHTS[backbone]}.IMAGENET1K_V1")
        assert weights.url == model_mod.imagenet_url(backbone)


def test_probe_gives_up_within_its_timeout(monkeypatch):
    "A name lookup that hangs (no packet leaves this machine): the probe answers at its timeout, not the lookup's end."
    def hung_lookup(*a, **k): time.sleep(5); raise OSError('name lookup timed out')
    monkeypatch.setattr(model_mod.socket, 'create_connection', hung_lookup)
    t0 = time.monotonic()
    assert not model_mod.reachable('http://example.invalid/x.pth', timeout=0.3)
    assert time.monotonic() - t0 < 5


def test_offline_switch_tries_nothing(tmp_path, monkeypatch, capsys):
    "AEL_OFFLINE=1 (CI sets it): no probe, no download, one line."
    monkeypatch.setenv('AEL_OFFLINE', '1'); monkeypatch.setenv('TORCH_HOME', str(tmp_path / 'home'))
    monkeypatch.setattr(model_mod, 'reachable', lambda *a, **k: pytest.fail('probed the network under AEL_OFFLINE'))
    assert model_mod.auto_imagenet('resnet18', False) is None
    out = capsys.readouterr().out
    assert out.count('\n') == 1 and 'AEL_OFFLINE is set (no download tried)' in out, out

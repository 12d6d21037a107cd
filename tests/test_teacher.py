"ael_nb.teacher and ael_nb.model with a real DistributedDataParallel student (gloo, one process)."
import pytest, torch, torch.distributed as dist
from torch import nn
from ael_nb.model import build_model, load_backbone, param_groups
from ael_nb.teacher import make_teacher, ema_update


@pytest.fixture
def group(tmp_path):
    dist.init_process_group('gloo', init_method=f'file://{tmp_path / "store"}', rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_ddp_student(group, tmp_path):
    torch.manual_seed(0)
    student = nn.parallel.DistributedDataParallel(build_model(3, 'resnet18'))
    teacher = make_teacher(student)
    assert not isinstance(teacher, nn.parallel.DistributedDataParallel) and not teacher.training
    student(torch.randn(2, 3, 32, 32))['out'].mean().backward()
    with torch.no_grad():
        for p in student.parameters(): p.add_(1.0)
    ema_update(teacher, student, 0)
    for k, v in student.module.state_dict().items(): assert torch.equal(teacher.state_dict()[k], v), k
    groups = param_groups(student, 0.01)
    assert sum(len(g['params']) for g in groups) == len(list(student.parameters()))
    torch.save(build_model(3, 'resnet18').backbone.state_dict(), tmp_path / 'bb.pth')
    assert load_backbone(student, tmp_path / 'bb.pth') == ([], [])

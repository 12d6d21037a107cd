"""One tiny step of any preset and method on the CPU: synthetic scenes, ResNet-18, 32 x 48 crops, 2 + 2 images."""
from ael_nb.config import PRESETS, get_config
from ael_nb.plan import TINY

PAPER = ['data.dataset=synthetic', 'data.train_split=train', 'data.val_split=val', 'data.synthetic_size=32,48',
         'data.synthetic_n=16', 'data.fraction=1/4', 'data.crop_size=32,48', 'data.scale=1,1', 'data.batch_size=4',
         'data.num_workers=0', 'model.backbone=resnet18', 'model.output_stride=16',
         'model.pretrained=none', 'optim.iters=3', 'optim.ohem_min_kept=200', 'run.log_interval=100', 'method.cp_exclude=']
FRAMEWORK = {p: p.split('-')[1] for p in PRESETS if p.split('-')[-1] in ('fixmatch', 'unimatch')}
METHODS = ['supervised', 'meanteacher', 'cutmix', 'ael', 'fixmatch', 'unimatch', 'unimatch_v2']
# UniMatch V2 trains the tiny DINOv2 + DPT (crops of multiples of 14) with AdamW
V2 = ['model.backbone=dinov2_tiny', 'data.crop_size=28,42', 'data.synthetic_size=28,42', 'optim.optimizer=adamw']

def tiny_config(preset: str, method: str | None, out, *extra):
    "`preset` shrunk to a tiny CPU step; `method` None keeps the preset's."
    small = TINY + ['optim.iters=3', 'run.log_interval=100'] if preset in ('cpu', 'cpu96') else TINY + PAPER
    if preset.endswith('unimatch_v2') or method == 'unimatch_v2': small = small + V2
    return get_config(preset, overrides=small + ([f'method.name={method}'] if method else []) + [f'run.out={out}', *extra])

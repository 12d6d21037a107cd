"""What the tools that write golden files share (`authors_golden.py`, `unimatch_v2_golden.py`,
`unimatch_v2_step_golden.py`, `eval_golden.py`, `released_golden.py`): the files' form (one key per line and every list
on one line, written atomically), the comparison of the kit's figures with a codebase's, and `.cuda()` as the identity
while a codebase's GPU code runs on the CPU."""
import contextlib, json
from pathlib import Path
import torch

def dumps(o, indent: int = 0) -> str:
    "JSON with one key per line and every list on one line (a small, diffable file)."
    if not isinstance(o, dict) or not o: return json.dumps(o)
    pad = ' ' * (indent + 1)
    items = ',\n'.join(f'{pad}{json.dumps(k)}: {dumps(v, indent + 1)}' for k, v in o.items())
    return '{\n' + items + '\n' + ' ' * indent + '}'

def write(fig: dict, out) -> Path:
    "`fig` to `out` in that form, through a temporary file."
    out = Path(out); out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix('.tmp'); tmp.write_text(dumps(fig) + '\n'); tmp.replace(out)
    return out

def compare(kit, ref, tol: float, path: str = '') -> list[str]:
    "Where `kit` differs from `ref` (numbers beyond `tol`, anything else at all); [] when they agree."
    if isinstance(ref, dict):
        if not isinstance(kit, dict) or kit.keys() != ref.keys(): return [f'{path}: keys {list(kit)} vs {list(ref)}']
        return [d for k in ref for d in compare(kit[k], ref[k], tol, f'{path}.{k}')]
    if isinstance(ref, list):
        if not isinstance(kit, list) or len(kit) != len(ref): return [f'{path}: {kit!r:.80} vs {ref!r:.80}']
        return [d for i, (a, b) in enumerate(zip(kit, ref)) for d in compare(a, b, tol, f'{path}[{i}]')]
    if isinstance(ref, float) and isinstance(kit, (int, float)) and not isinstance(kit, bool):
        return [] if abs(kit - ref) <= tol else [f'{path}: {kit!r} vs {ref!r} (tolerance {tol})']
    return [] if kit == ref else [f'{path}: {kit!r} vs {ref!r}']

@contextlib.contextmanager
def cpu_cuda():
    "`Tensor.cuda` as the identity while a codebase's functions run (they move tensors with `.cuda()`)."
    saved = torch.Tensor.cuda
    torch.Tensor.cuda = lambda self, *a, **k: self
    try: yield
    finally: torch.Tensor.cuda = saved

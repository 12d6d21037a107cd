"""The golden files' form, shared by the tools that write them (`authors_golden.py`, `unimatch_v2_golden.py`,
`unimatch_v2_step_golden.py`): one key per line and every list on one line, written atomically."""
import json
from pathlib import Path

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

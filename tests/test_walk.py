"""The walk of the configuration from `setup()` visits no module more than twice (issue 41).

The walk is recorded with `sys.setprofile` while `setup(cfg)` builds a tiny CPU run (`ael_nb.plan.TINY`). A step
of the walk is a call of a module-level function of an `ael_nb` module (methods and nested functions are their
object's or their function's business) that receives, as one of its arguments, the configuration: a `Config`, one
of its sections (`DataConfig`, ...), or one of their values, compared by identity (`cfg.run.device`, the string
handed to `resolve_device`; `cfg.optim.amp`, handed to `resolve_amp`). Values compared by identity are the strings,
floats and non-empty tuples of every configuration or section seen so far: None, booleans and small integers are
shared by every Python object and say nothing about where a value came from. A *visit* of a module is a maximal
run of consecutive steps whose functions belong to that module: the sequence `train core config core plan plan`
visits `core` twice and `plan` once."""
import dataclasses, itertools, sys
from collections import Counter
import ael_nb.config
from ael_nb.config import get_config
from ael_nb.plan import TINY
from ael_nb.train import setup

SECTIONS = tuple(c for c in vars(ael_nb.config).values() if isinstance(c, type) and dataclasses.is_dataclass(c)
                 and c.__module__ == 'ael_nb.config')

def _values(cfg, seen: set) -> set:
    "Add the ids of `cfg`, its sections and their strings, floats and non-empty tuples to `seen`."
    seen.add(id(cfg))
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if isinstance(v, SECTIONS): _values(v, seen)
        elif isinstance(v, (str, float)) or (isinstance(v, tuple) and v): seen.add(id(v))
    return seen

def walk(fn, cfg) -> tuple[object, list[tuple[str, str]]]:
    "`fn(cfg)`'s result and the (module, function) of each step of the walk of `cfg` (see the docstring above)."
    seen, steps = _values(cfg, set()), []
    def profile(frame, event, arg):
        if event != 'call' or not frame.f_globals.get('__name__', '').startswith('ael_nb.'): return
        code = frame.f_code
        if getattr(frame.f_globals.get(code.co_name), '__code__', None) is not code: return   # not a module function
        args = [frame.f_locals.get(n) for n in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]]
        for a in args:
            if isinstance(a, SECTIONS): _values(a, seen)                # a copy (`resolved`'s) is the configuration too
        if any(id(a) in seen for a in args): steps.append((frame.f_globals['__name__'].split('.')[-1], code.co_name))
    sys.setprofile(profile)
    try: out = fn(cfg)
    finally: sys.setprofile(None)
    return out, steps

def visits(modules: list[str]) -> Counter:
    "How often each module is visited: one visit per maximal run of consecutive steps in it."
    return Counter(m for m, _ in itertools.groupby(modules))

def test_visits_count_runs_of_steps():
    "The count can fail: the walk before issue 41 went train -> core -> config -> core -> plan -> faults -> plan."
    test = visits(['train', 'core', 'config', 'core', 'plan', 'plan', 'faults', 'plan', 'registry', 'plan'])
    assert test == Counter(train=1, core=2, config=1, plan=3, faults=1, registry=1) and max(test.values()) > 2

def test_walk_from_setup_visits_no_module_more_than_twice(tmp_path):
    run, steps = walk(setup, get_config('cpu', overrides=TINY + [f'run.out={tmp_path}']))
    run.close()
    modules = [m for m, _ in steps]
    counts = visits(modules)
    assert ('core', 'resolve_amp') in steps and ('config', 'resolved') in steps   # it follows values, not only objects
    assert [s for s in steps if s[1] == 'resolved'] == [('config', 'resolved')]   # resolved once
    assert max(counts.values()) <= 2, ' -> '.join(m for m, _ in itertools.groupby(modules)) + f'\n{dict(counts)}'

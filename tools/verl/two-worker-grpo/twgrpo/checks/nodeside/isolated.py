"""A task or actor the bundle sends to a Ray worker imports the standard library and the image's
packages before anything the job's PYTHONPATH adds: PYTHONPATH names folders on the shared
volume, where a planted pickletools.py must not stand in for the standard library's.

Ray unpickles a task's function or an actor's class, and imports every module it names,
before it runs; so the bundle's function travels as bytes inside a small one (task(); actor()
for a class, whose every method then runs the same way). On the worker, that one first moves
PYTHONPATH's folders behind the standard library's (and no further: a torch or verl that
PYTHONPATH puts before site-packages is still the one the probes import, as the training's
workers will), refuses to go on when a standard-library module is already loaded from outside
the standard library, and only then unpickles the bundle's function and calls it. It names no
module but sys, which every Python process has loaded, so nothing is looked up on the path
before the path is set. (Ray's own worker code imports what it needs before either runs, under
the job's path: a module planted for Ray itself is beyond this, as README's threat model says.)
"""
import sys


class ShadowedModule(RuntimeError):
    """A standard-library module of the worker was loaded from elsewhere (a planted file)."""


def task(ray, function):
    """function, wrapped for ray.remote(...): its bytes are unpickled on the worker only after
    the worker's path is set as above."""
    payload = ray.cloudpickle.dumps(function)

    def isolated(*args, **kwargs):
        return call(payload, args, kwargs)

    isolated.__name__ = isolated.__qualname__ = function.__name__
    return isolated


def actor(ray, cls):
    """cls, wrapped for ray.remote(...) as an actor: its bytes are unpickled on the worker only
    after the path is set, and each method runs under that path too. Call a method of the
    handle as handle.call.remote("name", *args)."""
    payload = ray.cloudpickle.dumps(cls)

    class Isolated:
        def __init__(self, *args, **kwargs):
            self.instance = call(payload, args, kwargs)

        def call(self, method, *args, **kwargs):
            return guarded(getattr(self.instance, method), args, kwargs)

    Isolated.__name__ = Isolated.__qualname__ = cls.__name__
    return Isolated


def call(payload, positional, keywords):
    """On the worker: set the path, check the loaded modules, then run the bundle's function."""
    return guarded(_load_and_call, (payload, positional, keywords), {})


def _load_and_call(payload, positional, keywords):
    import pickle  # the standard library's: guarded() has put it first on the path
    return pickle.loads(payload)(*positional, **keywords)


def guarded(function, positional, keywords):
    """function(*positional, **keywords) with the standard library first on the path, refused
    when a standard-library module is already loaded from elsewhere; the path is restored after."""
    saved = list(sys.path)
    sys.path[:] = standard_first(sys.path, sys.modules["os"].environ.get("PYTHONPATH", ""))
    try:
        shadowed = shadowed_modules()
        if shadowed:
            raise ShadowedModule("standard-library module(s) loaded from outside the standard "
                                 f"library on this node: {', '.join(shadowed[:5])} — remove the "
                                 "file(s) from PYTHONPATH's folders")
        return function(*positional, **keywords)
    finally:
        sys.path[:] = saved


def standard_first(path, pythonpath):
    """path with PYTHONPATH's entries (and the empty entry, the current folder) moved behind
    the standard library's entries, before site-packages and the rest."""
    os = sys.modules["os"]
    added = {os.path.abspath(entry) for entry in pythonpath.split(os.pathsep) if entry}
    late = [entry for entry in path if not entry or os.path.abspath(entry) in added]
    rest = [entry for entry in path if entry not in late]
    standard = [entry for entry in rest if in_standard_library(entry)]
    return standard + late + [entry for entry in rest if entry not in standard]


def in_standard_library(entry):
    """Whether a sys.path entry is the standard library's: its zip, its folder, lib-dynload;
    not a site-packages or dist-packages folder under it."""
    os = sys.modules["os"]
    home = getattr(sys, "_stdlib_dir", None) or os.path.dirname(os.__file__)
    real, home = os.path.realpath(entry), os.path.realpath(home)
    if real.endswith(".zip") and os.path.dirname(real) == os.path.dirname(home):
        return True
    if real != home and not real.startswith(home + os.sep):
        return False
    return not {"site-packages", "dist-packages"} & set(real[len(home):].split(os.sep))


def shadowed_modules():
    """'name (file)' for each loaded standard-library module whose file lies outside the
    standard library's and the image's site-packages folders (Python 3.10 and newer name the
    standard library's modules; older ones are not checked)."""
    names = getattr(sys, "stdlib_module_names", ())
    if not names:
        return []
    import sysconfig
    os = sys.modules["os"]
    # site-packages too: the image's own packages may stand in for one (setuptools' distutils)
    homes = {os.path.realpath(sysconfig.get_paths()[key])
             for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    found = []
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if name.split(".")[0] not in names or not isinstance(where, str):
            continue
        real = os.path.realpath(where)
        if not any(real.startswith(home + os.sep) for home in homes):
            found.append(f"{name} ({where})")
    return sorted(found)

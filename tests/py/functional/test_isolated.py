"""The path a bundle task runs under on a Ray worker (checks/nodeside/isolated.py): the standard library
before PYTHONPATH's folders, PYTHONPATH's folders before site-packages (the probes import the
torch and verl the training's workers will import)."""
import sys
import sysconfig

import twgrpo
from twgrpo.checks.nodeside import isolated

STDLIB = sysconfig.get_paths()["stdlib"]
SITE = sysconfig.get_paths()["purelib"]


def test_pythonpath_goes_behind_the_standard_library_and_before_site_packages():
    path = ["", "/vol/shadow", STDLIB, f"{STDLIB}/lib-dynload", SITE, "/vol/rollout"]
    ordered = isolated.standard_first(path, "/vol/shadow:/vol/rollout")
    assert ordered == [STDLIB, f"{STDLIB}/lib-dynload", "", "/vol/shadow", "/vol/rollout", SITE]


def test_site_packages_under_the_standard_library_folder_is_not_the_standard_library():
    assert isolated.in_standard_library(STDLIB)
    assert not isolated.in_standard_library(f"{STDLIB}/site-packages")
    assert not isolated.in_standard_library(SITE)
    assert not isolated.in_standard_library("/vol/shadow")


def test_the_worker_path_is_restored_after_the_task(monkeypatch):
    before = list(sys.path)
    payload = __import__("pickle").dumps(len)
    assert isolated.call(payload, (["a", "b"],), {}) == 2
    assert sys.path == before


AGENT = '''import wave


class Agent:
    def __init__(self, prefix):
        self.prefix = prefix

    def which(self, suffix):
        return self.prefix + getattr(wave, "MARK", "stdlib") + suffix
'''


def test_an_actor_class_and_its_methods_never_import_a_module_planted_on_pythonpath(
        ray_head, tmp_path, monkeypatch):
    # wave: a standard-library module that neither a Ray worker nor Ray's own unpickling loads,
    # which the actor's class names; a planted wave.py on the job's PYTHONPATH marks its import.
    import ray
    planted = tmp_path / "planted"
    planted.mkdir()
    marker = tmp_path / "planted-ran"
    (planted / "wave.py").write_text(f"open({str(marker)!r}, 'w').close()\nMARK = 'planted'\n")
    (tmp_path / "agentmod.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    import agentmod
    ray.init(address=ray_head, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(planted)}})
    try:
        ray.cloudpickle.register_pickle_by_value(agentmod)
        ray.cloudpickle.register_pickle_by_value(twgrpo)  # as the bundle's checks do
        handle = ray.remote(num_cpus=0)(isolated.actor(ray, agentmod.Agent)).remote("<")
        assert ray.get(handle.call.remote("which", ">"), timeout=120) == "<stdlib>"
        assert not marker.exists()
        # the same class without the wrapper does import the planted module: the test can fail
        bare = ray.remote(num_cpus=0)(agentmod.Agent).remote("<")
        assert ray.get(bare.which.remote(">"), timeout=120) == "<planted>"
        assert marker.exists()
    finally:
        ray.shutdown()
        sys.modules.pop("agentmod", None)

"""The path a bundle task runs under on a Ray worker (checks/isolated.py): the standard library
before PYTHONPATH's folders, PYTHONPATH's folders before site-packages (the probes import the
torch and verl the training's workers will import)."""
import sys
import sysconfig

from twgrpo.checks import isolated

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

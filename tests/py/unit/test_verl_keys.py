"""EXTRA_OVERRIDES against the pinned verl's own trainer config: typos refused with a did-you-mean,
the profile's knobs named, code and files outside the pins refused; and the standard-library
YAML reader that reads verl's config, with PyYAML as its oracle."""
import re
import types
import zipfile
from pathlib import Path

import pytest
import yaml

from test_recipe import profile_file
from twgrpo import cli
from twgrpo.checks.rules import recipe, verl_keys
from twgrpo.formats import yamlsubset
from twgrpo.run.findings import run_checks
from twgrpo.run.profile import load_profile

REPO = Path(__file__).resolve().parents[3]
WHEEL = REPO / ".cache" / "wheels" / "verl-0.6.0-py3-none-any.whl"
needs_wheel = pytest.mark.skipif(not WHEEL.is_file(),
                                 reason=f"needs {WHEEL.name} (tests/run.sh downloads it)")


@pytest.fixture(scope="module")
def verl_tree(tmp_path_factory):
    """verl 0.6.0's trainer config files, where a checkout holds them."""
    if not WHEEL.is_file():
        pytest.skip(f"needs {WHEEL.name} (tests/run.sh downloads it)")
    root = tmp_path_factory.mktemp("verl")
    with zipfile.ZipFile(WHEEL) as archive:
        for name in archive.namelist():
            if name.startswith("verl/trainer/config/") and name.endswith(".yaml"):
                archive.extract(name, root)
    return root


def ids(found, level="error"):
    return [f.id for f in found if f.level == level]


@pytest.mark.parametrize("word,ident,said", [
    # the user's own keys, as verl has them
    ("data.shuffle=true", None, ""),
    ("actor_rollout_ref.actor.use_kl_loss=true", None, ""),
    ("actor_rollout_ref.nccl_timeout=1800", None, ""),
    ("++trainer.max_actor_ckpt_to_keep=1", None, ""),
    ("~reward_model.sandbox_fusion", None, ""),
    ("+actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=fa3", None, ""),
    ("+data.apply_chat_template_kwargs.enable_thinking=false", None, ""),
    # typos: refused with the key verl has
    ("data.shufle=true", "GEN-E053", "did you mean data.shuffle?"),
    ("+data.shufle=true", "GEN-E053", "did you mean data.shuffle?"),
    ("actor_rollout_ref.optim.weight_decay=0", "GEN-E053",
     "did you mean actor_rollout_ref.actor.optim.weight_decay?"),
    ("~reward_modle", "GEN-E053", "did you mean reward_model?"),
    ("trainer.no_such_thing_at_all=1", "GEN-E053", "has no key trainer.no_such_thing_at_all"),
    ("+trainer.max_actor_ckpt_to_keep=1", "GEN-E054", "drop the '+'"),
    # the profile's knobs: named, so the report never prints a value that did not run
    ("actor_rollout_ref.actor.optim.lr=2e-6", "GEN-E050", "set LEARNING_RATE"),
    ("actor_rollout_ref.actor.fsdp_config.param_offload=false", "GEN-E050", "set PARAM_OFFLOAD"),
    ("actor_rollout_ref.rollout.gpu_memory_utilization=0.5", "GEN-E050",
     "set GPU_MEMORY_UTILIZATION"),
    ("algorithm.adv_estimator=gae", "GEN-E050", "runs GRPO"),
    # code and files the pins do not cover
    ("custom_reward_function.path=/mnt/x/reward.py", "GEN-E050", "set REWARD_FILE"),
    ("custom_reward_function.name=score", "GEN-E050", "set REWARD_FUNCTION"),
    ("data.custom_cls.path=pkg/ds.py", "GEN-E052", "data.custom_cls.path"),
    ("data.sampler.class_path=pkg.sampler", "GEN-E052", "data.sampler.class_path"),
    ("actor_rollout_ref.model.tokenizer_path=other", "GEN-E052", "tokenizer_path"),
    ("actor_rollout_ref.model.hf_config_path=other", "GEN-E052", "hf_config_path"),
    ("reward_model.model.path=/models/rm", "GEN-E052", "reward_model.model.path"),
    ("actor_rollout_ref.model.external_lib=mypkg", "GEN-E052", "external_lib"),
    ("+actor_rollout_ref.model.override_config.attention_dropout=0.1", "GEN-E052",
     "override_config"),
    ("actor_rollout_ref.rollout.multi_turn.tool_config_path=t.yaml", "GEN-E052", "tool_config_path"),
    ("trainer.log_val_generations=/etc/passwd", "GEN-E052", "is a path or URL"),
    ("actor_rollout_ref.rollout.trace.backend=s3://bucket/x", "GEN-E052", "is a path or URL"),
])
def test_each_override_is_judged_against_the_pinned_verl(tmp_path, verl_tree, word, ident, said):
    p = load_profile(str(profile_file(tmp_path, EXTRA_OVERRIDES=word)))
    found = recipe.check_extra_overrides(p, verl_tree)
    assert ids(found) == ([ident] if ident else [])
    assert ids(found, "warning") == []
    if ident:
        assert said in found[0].message and found[0].hint


def test_check_profile_refuses_a_typo_with_a_did_you_mean(tmp_path, verl_tree, capsys):
    path = profile_file(tmp_path, EXTRA_OVERRIDES="data.shufle=true trainer.log_val_generations=2")
    assert cli.main(["check-profile", "--profile", str(path), "--verl-root", str(verl_tree)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"extra-overrides \.+ FAIL \(1\)", out)
    assert "(GEN-E053) EXTRA_OVERRIDES 'data.shufle=true'" in out
    assert "did you mean data.shuffle?" in out and "HINT:" in out


def test_check_profile_finds_the_checkout_on_the_volume(tmp_path, verl_tree, capsys):
    path = profile_file(tmp_path, EXTRA_OVERRIDES="data.shufle=true")
    checkout = load_profile(str(path)).verl_root(tmp_path / "volume")
    checkout.parent.mkdir(parents=True)
    checkout.symlink_to(verl_tree)
    assert cli.main(["check-profile", "--profile", str(path),
                     "--storage-root", str(tmp_path / "volume")]) == 1
    assert "did you mean data.shuffle?" in capsys.readouterr().out


def test_without_a_checkout_check_profile_warns_that_keys_were_not_checked(tmp_path, capsys):
    path = profile_file(tmp_path, EXTRA_OVERRIDES="data.shufle=true")
    assert cli.main(["check-profile", "--profile", str(path),
                     "--storage-root", str(tmp_path / "absent")]) == 0
    out = capsys.readouterr().out
    assert "(GEN-W050)" in out and "no verl checkout at" in out
    # Nothing to check, nothing to say: the tutorial's profile has no overrides.
    assert cli.main(["check-profile", "--storage-root", str(tmp_path / "absent")]) == 0
    assert "GEN-W050" not in capsys.readouterr().out


def test_preflight_refuses_what_verl_would_refuse_and_an_unreadable_config(tmp_path, verl_tree):
    p = load_profile(str(profile_file(tmp_path, EXTRA_OVERRIDES="data.shufle=true")))
    ctx = types.SimpleNamespace(profile=p, verl_root=verl_tree)
    results = {r.name: r for r in run_checks("preflight", recipe.RULES, ctx)}
    assert ids(results["extra-overrides"].findings) == ["GEN-E053"]
    # A checkout without the flattened config (or one outside the reader's subset) is an error.
    broken = tmp_path / "broken"
    (broken / verl_keys.CONFIG).parent.mkdir(parents=True)
    assert ids(recipe.check_extra_overrides(p, broken)) == ["GEN-E055"]
    (broken / verl_keys.CONFIG).write_text("a: &anchor 1\n")
    found = recipe.check_extra_overrides(p, broken)
    assert ids(found) == ["GEN-E055"] and "outside the subset" in found[0].message


@needs_wheel
def test_the_reader_agrees_with_pyyaml_on_every_verl_config_file(verl_tree):
    def numbers(value):  # YAML 1.1 (PyYAML) reads 1e-6 and 100_000 as text; OmegaConf as numbers
        if isinstance(value, dict):
            return {k: numbers(v) for k, v in value.items()}
        if isinstance(value, list):
            return [numbers(v) for v in value]
        if isinstance(value, str) and re.fullmatch(r"[-+]?[0-9_.]+([eE][-+]?[0-9]+)?", value):
            return float(value.replace("_", "")) if re.search(r"[.eE]", value) else \
                int(value.replace("_", ""))
        return value
    files = sorted(verl_tree.rglob("*.yaml"))
    assert len(files) > 20
    for path in files:
        assert numbers(yamlsubset.load(path)) == numbers(yaml.safe_load(path.read_text())), path


@pytest.mark.parametrize("text,problem", [
    ("a: |\n  text\n", "outside the subset"),
    ("a:\n\tb: 1\n", "tab"),
    ("a: 1\na: 2\n", "appears twice"),
    ("a: {b: 1}\n", "flow mappings"),
    ("a:\n- b: 1\n  c: 2\n", "one-line mappings"),
    ("a: 1\n  b: 2\n", "deeper line"),
    ("a: 'open\n", "unclosed quote"),
])
def test_the_reader_refuses_what_it_does_not_know(text, problem):
    with pytest.raises(yamlsubset.YamlError, match=problem):
        yamlsubset.loads(text)


def test_the_reader_reads_the_subset():
    text = ("# head\nx:\n  'n': 1  # note\n  s: \"a#b\"\n  e: {}\n  l: []\n  f: [a, 2]\n"
            "  z: ~\nlog:\n- console\n- wandb\ndefaults:\n  - actor@a.b: dp\n")
    assert yamlsubset.loads(text) == {
        "x": {"n": 1, "s": "a#b", "e": {}, "l": [], "f": ["a", 2], "z": None},
        "log": ["console", "wandb"], "defaults": [{"actor@a.b": "dp"}]}

"""make rayjob: the KubeRay RayJob it prints is valid against the RayJob CRD's schema of a pinned
KubeRay release (tests/data/, validated with jsonschema as the API server's strict field
validation would: no field the schema does not know), and carries make submit's entrypoint and
RuntimeEnv, the profile's topology, the volume at STORAGE_ROOT on every pod, and retries that
resume when the profile saves checkpoints. tests/py/unit/test_rayjob_production.py has the production
settings and the overlay."""
import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest

import yaml

from prep import bundle, jobspec, rayjob
from twgrpo.run.catalog import CATALOG
from twgrpo.run.profile import load_profile

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "data" / "kuberay-v1.4.2-rayjob-v1.schema.json"
ROOT = "/mnt/verl-reproduction"
PROFILES = ("tutorial-2x2-a100", "smoke-1x1", "smoke-2x1")


def strict(schema):
    """The CRD's schema as the API server applies it with strict field validation (kubectl's
    default): an object that lists its properties takes no others, unless it preserves them."""
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    return schema


@pytest.fixture(scope="module")
def validator():
    data = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert data["tag"] == "v1.4.2" and data["kind"] == "RayJob" and data["version"] == "v1"
    schema = strict(data["openAPIV3Schema"])
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def printed(capsys, *args):
    status = rayjob.main(["--image", "registry.example/verl:0.6", "--claim", "verl-volume", *args])
    out, err = capsys.readouterr()
    return status, out, err


def errors(validator, document):
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in validator.iter_errors(document))


@pytest.mark.parametrize("profile", PROFILES)
def test_the_rayjob_of_every_profile_is_valid_against_the_pinned_crd_schema(capsys, validator, profile):
    status, out, err = printed(capsys, "--run-id", "exp-001", "--profile", profile)
    assert status == 0, err
    document = yaml.safe_load(out)
    assert errors(validator, document) == []
    p = load_profile(profile)
    cluster = document["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]["template"]["spec"]
    assert head["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": p.GPUS_PER_NODE}
    workers = cluster.get("workerGroupSpecs", [])
    assert sum(group["replicas"] for group in workers) == p.NODES - 1  # the head is a GPU node
    for group in workers:
        assert group["minReplicas"] == group["maxReplicas"] == group["replicas"]
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert limits == {"nvidia.com/gpu": p.GPUS_PER_NODE}


def test_the_rayjob_carries_make_submits_entrypoint_and_runtime_env(capsys):
    status, out, _ = printed(capsys, "--run-id", "exp-001", "--profile", "smoke-1x1",
                             "--var", "SAVE_FREQ=1", "--var", "RESUME_FROM=exp-000")
    assert status == 0
    spec = yaml.safe_load(out)["spec"]
    submitted = jobspec.job_spec(ROOT, "smoke-1x1", None,
                                 {"RUN_ID": "exp-001", "SAVE_FREQ": "1", "RESUME_FROM": "exp-000",
                                  "TWGRPO_IMAGE": "registry.example/verl:0.6"})
    assert spec["entrypoint"] == submitted["entrypoint"]
    assert spec["entrypoint"].startswith("bash -c '")
    runtime_env = yaml.safe_load(spec["runtimeEnvYAML"])
    assert runtime_env == submitted["runtime_env"]
    assert "working_dir" not in runtime_env and "excludes" not in runtime_env
    env = runtime_env["env_vars"]
    assert (env["RUN_ID"], env["SAVE_FREQ"], env["RESUME_FROM"]) == ("exp-001", "1", "exp-000")
    version = bundle.version_of(bundle.BUNDLE / bundle.LAUNCHER_NAME)  # the submitted bundle's
    assert env["PYTHONPATH"].endswith(f"{ROOT}/tools/verl/two-worker-grpo/{version}/rollout")
    assert spec["jobId"] == "exp-001" and spec["submissionMode"] == "HTTPMode"


def test_the_rayjob_mounts_the_claim_at_storage_root_on_every_pod_and_retries_by_resuming(capsys):
    status, out, _ = printed(capsys, "--run-id", "exp-7", "--storage-root", "/data/vol",
                             "--profile", "tutorial-2x2-a100")
    assert status == 0
    document = yaml.safe_load(out)
    cluster = document["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster["workerGroupSpecs"]]
    for pod in pods:
        container = pod["spec"]["containers"][0]
        assert container["image"] == "registry.example/verl:0.6"
        mount = [m for m in container["volumeMounts"] if m["mountPath"] == "/data/vol"]
        assert len(mount) == 1
        volume = [v for v in pod["spec"]["volumes"] if v["name"] == mount[0]["name"]]
        assert volume == [{"name": mount[0]["name"],
                           "persistentVolumeClaim": {"claimName": "verl-volume"}}]
    assert document["spec"]["shutdownAfterJobFinishes"] is True
    assert document["spec"]["backoffLimit"] == 2  # the profile saves checkpoints: retries resume
    assert yaml.safe_load(document["spec"]["runtimeEnvYAML"])["env_vars"]["RESUME_FROM"] == "auto"
    assert "is the launcher's next attempt (exp-7.2, ...), resuming from the newest" in out
    status, out, _ = printed(capsys, "--run-id", "exp-7", "--retries", "0")
    spec = yaml.safe_load(out)["spec"]
    assert spec["backoffLimit"] == 0 and "RESUME_FROM" not in yaml.safe_load(spec["runtimeEnvYAML"])["env_vars"]
    assert "# Retries are off (backoffLimit: 0)" in out and "RESUME_FROM=<the preempted RUN_ID>" in out


def test_a_planted_wrong_field_or_type_fails_validation(capsys, validator):
    _, out, _ = printed(capsys, "--run-id", "exp-001")
    document = yaml.safe_load(out)
    assert errors(validator, document) == []
    misspelt = copy.deepcopy(document)
    misspelt["spec"]["shutdownAfterJobFinish"] = True
    assert errors(validator, misspelt) == [
        "spec: Additional properties are not allowed ('shutdownAfterJobFinish' was unexpected)"]
    wrong_type = copy.deepcopy(document)
    wrong_type["spec"]["backoffLimit"] = "0"
    assert errors(validator, wrong_type) == ["spec/backoffLimit: '0' is not of type 'integer'"]
    deep = copy.deepcopy(document)
    deep["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["volumeMount"] = []
    assert len(errors(validator, deep)) == 1


def test_a_cpu_only_head_holds_no_gpu_and_every_node_is_a_worker(capsys, validator):
    status, out, err = printed(capsys, "--run-id", "exp-001", "--head-gpus", "0")
    assert status == 0
    document = yaml.safe_load(out)
    assert errors(validator, document) == []
    cluster = document["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]
    assert head["rayStartParams"] == {"num-gpus": "0"}
    assert "resources" not in head["template"]["spec"]["containers"][0]
    assert cluster["workerGroupSpecs"][0]["replicas"] == load_profile("tutorial-2x2-a100").NODES
    assert "PRE-E012" not in err and "unsupported" not in err  # preflight takes a CPU-only head
    assert "and a CPU-only head (preflight records it, counts only the GPU nodes)" in out


@pytest.mark.parametrize("args, fid, text", [
    (["--head-gpus", "3"], "SUB-E020", "RAYJOB_HEAD_GPUS='3': a head holds the profile's 2 GPUs (empty) or none (0)"),
    (["--image", "verl image"], "SUB-E021", "RAYJOB_IMAGE='verl image' is not an image reference"),
    (["--claim", "Shared_Volume"], "SUB-E021", "RAYJOB_CLAIM='Shared_Volume' is not a claim name"),
    (["--run-id", ""], "SUB-E012", "no RUN_ID given"),
    (["--profile", "nope"], "SUB-E010", "PROFILE=nope is not a profile of the bundle"),
    (["--var", "NCCL_DEBUG=WARN"], "SUB-E011", "job variable 'NCCL_DEBUG' cannot be set"),
])
def test_bad_knobs_are_one_line_with_an_id_and_its_hint_and_print_no_manifest(capsys, args, fid, text):
    base = ["--run-id", "exp-001", "--image", "registry.example/verl:0.6", "--claim", "verl-volume"]
    assert rayjob.main([*base, *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    first, *rest = err.splitlines()
    assert first.startswith(f"rayjob: ({fid}) ") and text in first
    # every refusal, JobsError's SUB-E02x too, says its fix once: the catalog's HINT line
    assert rest == [f"    HINT: {CATALOG[fid][1]}"] and " — " not in first


@pytest.mark.parametrize("run_id", ["exp-001", "Exp_2.b", "7-run", "a" * 128, "x." * 40 + "y"])
def test_the_rayjob_name_is_a_dns_label_of_at_most_47_characters(run_id):
    name = rayjob.k8s_name(run_id)
    assert re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name) and len(name) <= 47
    assert rayjob.k8s_name(run_id) == name
    if re.match(r"^[a-z][-a-z0-9]{0,46}$", run_id) and not run_id.endswith("-"):
        assert name == run_id  # a RUN_ID that is already a name is kept as it is


def test_the_schema_is_kuberays_published_crd():
    data = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert data["source"].endswith("/v1.4.2/ray-operator/config/crd/bases/ray.io_rayjobs.yaml")
    spec = data["openAPIV3Schema"]["properties"]["spec"]["properties"]
    for field in ("entrypoint", "runtimeEnvYAML", "shutdownAfterJobFinishes", "backoffLimit",
                  "jobId", "submissionMode", "rayClusterSpec"):
        assert field in spec


@pytest.mark.parametrize("knob, value", [("--claim", "verl-volume\n"), ("--image", "registry.example/verl:0.6\n")])
def test_a_value_with_a_final_newline_is_refused_not_printed(capsys, knob, value):
    base = {"--run-id": "exp-001", "--image": "registry.example/verl:0.6", "--claim": "verl-volume"}
    base[knob] = value
    assert rayjob.main([item for pair in base.items() for item in pair]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "(SUB-E021)" in err


def test_yaml_keys_and_values_with_newlines_read_back_exactly():
    from prep import yamltext
    data = {"a\n": "x\ny: z", "b": ["c\n", "d: e\n"], "plain": "v"}
    assert yaml.safe_load(yamltext.dump(data)) == data


def test_a_site_profiles_rayjob_pins_its_sha256_and_is_labelled_with_its_name(capsys, validator,
                                                                            tmp_path):
    text = (bundle.BUNDLE / "profiles" / "smoke-1x1.env").read_text()
    path = tmp_path / "ours.env"
    path.write_text(text.replace("PROFILE_NAME=smoke-1x1", "PROFILE_NAME=ours"))
    status, out, err = printed(capsys, "--run-id", "exp-001", "--profile", str(path))
    assert status == 0, err
    document = yaml.safe_load(out)
    assert errors(validator, document) == []
    digest = load_profile(str(path)).sha256
    assert f"export PROFILE=ours PROFILE_SHA256={digest}" in document["spec"]["entrypoint"]
    assert document["metadata"]["labels"]["two-worker-grpo/profile"] == "ours"

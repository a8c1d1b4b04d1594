"""make rayjob: the KubeRay RayJob it prints is valid against the RayJob CRD's schema of a pinned
KubeRay release (tests/data/, validated with jsonschema as the API server's strict field
validation would: no field the schema does not know), and carries make submit's entrypoint and
RuntimeEnv, the profile's topology, the volume at STORAGE_ROOT on every pod, and no retries."""
import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from prep import jobspec, rayjob
from twgrpo.run.profile import load_profile

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "data" / "kuberay-v1.4.2-rayjob-v1.schema.json"
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
                                 {"RUN_ID": "exp-001", "SAVE_FREQ": "1", "RESUME_FROM": "exp-000"})
    assert spec["entrypoint"] == submitted["entrypoint"]
    assert spec["entrypoint"].startswith("bash -c 'set -euo pipefail\n")
    runtime_env = yaml.safe_load(spec["runtimeEnvYAML"])
    assert runtime_env == submitted["runtime_env"]
    assert "working_dir" not in runtime_env and "excludes" not in runtime_env
    env = runtime_env["env_vars"]
    assert (env["RUN_ID"], env["SAVE_FREQ"], env["RESUME_FROM"]) == ("exp-001", "1", "exp-000")
    assert env["PYTHONPATH"].endswith(f"{ROOT}/tools/verl/two-worker-grpo/rollout")  # hf profile
    assert spec["jobId"] == "exp-001" and spec["submissionMode"] == "HTTPMode"


def test_the_rayjob_mounts_the_claim_at_storage_root_on_every_pod_and_never_retries(capsys):
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
    assert document["spec"]["backoffLimit"] == 0
    assert "# Retries are off (backoffLimit: 0): a retry would start the same RUN_ID again," in out
    assert "LAUNCH-E008" in out and "RESUME_FROM=<the preempted RUN_ID>" in out


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
    assert "PRE-E012" in err  # today's preflight counts the head as a node: said at once


@pytest.mark.parametrize("args, fid, text", [
    (["--head-gpus", "3"], "SUB-E020", "RAYJOB_HEAD_GPUS='3': a head holds the profile's 2 GPUs (empty) or none (0)"),
    (["--image", "verl image"], "SUB-E021", "RAYJOB_IMAGE='verl image' is not an image reference"),
    (["--claim", "Shared_Volume"], "SUB-E021", "RAYJOB_CLAIM='Shared_Volume' is not a claim name"),
    (["--run-id", ""], "SUB-E012", "no RUN_ID given"),
    (["--profile", "nope"], "SUB-E010", "PROFILE=nope is not a profile of the bundle"),
    (["--var", "NCCL_DEBUG=WARN"], "SUB-E011", "job variable 'NCCL_DEBUG' cannot be set"),
])
def test_bad_knobs_are_one_line_with_an_id_and_print_no_manifest(capsys, args, fid, text):
    base = ["--run-id", "exp-001", "--image", "registry.example/verl:0.6", "--claim", "verl-volume"]
    assert rayjob.main([*base, *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"rayjob: ({fid}) ") and text in err and err.count("\n") == 1


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

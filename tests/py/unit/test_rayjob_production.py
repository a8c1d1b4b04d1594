"""make rayjob for a production cluster: RDMA devices and IPC_LOCK, placement (nodeSelector,
tolerations, spread), Guaranteed pod sizes, pull secrets, a service account, variables from
Kubernetes secrets (never their values), and an overlay merged into the pod templates. Every
manifest is validated against KubeRay v1.4.2's RayJob CRD schema (strict, as kubectl applies it),
with and without overlay; docs/your-cluster.md's 4 x 8 IB profile behind a CPU-only head is the
case the operator meets."""
import os
import re

import pytest
import yaml

from dev.sandbox import install_sandbox
from prep import overlay, rayjob
from prep.bundle import BUNDLE, REPO
from twgrpo.run.catalog import CATALOG
from test_rayjob import errors, validator  # noqa: F401  (the strict CRD validator fixture)

DIGEST_IMAGE = "registry.example/verl@sha256:" + "ab" * 32
OVERLAY = """\
# what the cluster needs beyond the settings: its own taint and the workers' RDMA device
spec:
  tolerations:
    - key: dedicated
      operator: Equal
      value: rl-training
      effect: NoSchedule
  priorityClassName: training-high
"""
SPLIT_OVERLAY = """\
head:
  spec:
    tolerations:
      - {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
workers:
  spec:
    tolerations:
      - key: dedicated
        operator: Exists
        effect: NoSchedule
    containers:
      - resources:
          limits:
            rdma/hca_shared_devices_a: 1
          requests:
            rdma/hca_shared_devices_a: 1
        env:
          - name: NCCL_IB_GID_INDEX
            value: "3"
"""


def doc_profile():
    """docs/your-cluster.md's profile lines applied to the tutorial profile, as a reader would."""
    doc = (REPO / "docs" / "your-cluster.md").read_text(encoding="utf-8")
    lines = dict(line.split("=", 1) for line in
                 re.search(r"```env\n(.*?)```", doc, re.S).group(1).splitlines() if "=" in line)
    text = (BUNDLE / "profiles" / "tutorial-2x2-a100.env").read_text(encoding="utf-8")
    seen = set()
    out = []
    for line in text.splitlines():
        key = line.split("=", 1)[0]
        if key in lines:
            line = f"{key}={lines[key]}"
            seen.add(key)
        out.append(line.replace("PROFILE_NAME=tutorial-2x2-a100", "PROFILE_NAME=ib-4x8-h100"))
    out += [f"{k}={v}" for k, v in lines.items() if k not in seen]
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def ib_bundle(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bundle")
    install_sandbox(folder, {"ib-4x8-h100": doc_profile()})
    return folder


def printed(capsys, *args, image=DIGEST_IMAGE):
    status = rayjob.main(["--image", image, "--claim", "verl-volume", "--run-id", "exp-ib", *args])
    out, err = capsys.readouterr()
    return status, out, err


def templates(document):
    cluster = document["spec"]["rayClusterSpec"]
    return cluster["headGroupSpec"]["template"], [g["template"] for g in cluster["workerGroupSpecs"]]


PRODUCTION = ["--rdma", "rdma/hca_shared_devices_a=1", "--node-selector",
              "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3", "--tolerations",
              "nvidia.com/gpu:NoSchedule,dedicated=rl:NoExecute", "--affinity", "spread",
              "--head-resources", "cpu=8,memory=32Gi", "--worker-resources", "cpu=96,memory=1600Gi",
              "--pull-secrets", "registry-cred", "--service-account", "verl-runner",
              "--secret-env", "WANDB_API_KEY=wandb/api-key"]


@pytest.mark.parametrize("with_overlay", [False, True])
def test_4x8_ib_behind_a_cpu_only_head_with_overlay_is_valid_and_carries_no_secret_value(
        capsys, validator, ib_bundle, tmp_path, with_overlay):  # noqa: F811
    more = []
    if with_overlay:
        (tmp_path / "overlay.yaml").write_text(SPLIT_OVERLAY, encoding="utf-8")
        more = ["--overlay", str(tmp_path / "overlay.yaml")]
    status, out, err = printed(capsys, "--bundle", str(ib_bundle), "--profile", "ib-4x8-h100",
                               "--head-gpus", "0", *PRODUCTION, *more,
                               "--var", "WANDB_PROJECT=verl-grpo")
    assert status == 0, err
    document = yaml.safe_load(out)
    assert errors(validator, document) == []
    head, workers = templates(document)
    assert document["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 4
    assert document["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"] == {"num-gpus": "0"}
    want = {"cpu": "96", "memory": "1600Gi", "nvidia.com/gpu": 8, "rdma/hca_shared_devices_a": 1}
    for pod in workers:
        container = pod["spec"]["containers"][0]
        assert container["resources"] == {"limits": want, "requests": want}
        assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    head_box = head["spec"]["containers"][0]
    assert head_box["resources"]["limits"] == {"cpu": "8", "memory": "32Gi"}  # no GPU, no RDMA
    assert "securityContext" not in head_box
    for pod in [head, *workers]:
        spec, box = pod["spec"], pod["spec"]["containers"][0]
        assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
        assert {"key": "dedicated", "operator": "Equal", "value": "rl", "effect": "NoExecute"} in spec["tolerations"]
        assert spec["imagePullSecrets"] == [{"name": "registry-cred"}]
        assert spec["serviceAccountName"] == "verl-runner"
        assert spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
            "topologyKey"] == "kubernetes.io/hostname"
        assert {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}} \
            in box["env"]
        assert all("value" not in e for e in box["env"] if e["name"] == "WANDB_API_KEY")
        if with_overlay:
            assert {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    if with_overlay:  # the workers' piece only: an RDMA env and resource on the Ray container
        assert {"name": "NCCL_IB_GID_INDEX", "value": "3"} in workers[0]["spec"]["containers"][0]["env"]
        assert "NCCL_IB_GID_INDEX" not in out.split("workerGroupSpecs")[0]
    env = yaml.safe_load(document["spec"]["runtimeEnvYAML"])["env_vars"]
    assert env["TWGRPO_IMAGE"] == DIGEST_IMAGE and env["WANDB_PROJECT"] == "verl-grpo"
    assert "WANDB_API_KEY" not in env
    assert document["spec"]["backoffLimit"] == 2 and env["RESUME_FROM"] == "auto"  # SAVE_FREQ=20
    assert "SUB-W002" not in err + out  # by digest: no warning
    assert "PRE-E012" not in err + out


def test_a_secret_value_in_job_env_is_refused_and_never_printed(capsys):
    status, out, err = printed(capsys, "--var", "WANDB_API_KEY=s3cr3t-value")
    assert status == 2 and out == ""
    assert err.startswith("rayjob: (SUB-E140) JOB_ENV sets WANDB_API_KEY") and "s3cr3t" not in err
    assert err.splitlines()[1:] == [f"    HINT: {CATALOG['SUB-E140'][1]}"]  # RAYJOB_SECRET_ENV=...


def test_an_image_by_tag_is_warned_about(capsys, validator):  # noqa: F811
    status, out, err = printed(capsys, image="registry.example/verl:0.6")
    assert status == 0 and errors(validator, yaml.safe_load(out)) == []
    assert "rayjob: (SUB-W002) RAYJOB_IMAGE=registry.example/verl:0.6 is a tag" in err
    assert "# Warning (SUB-W002)" in out
    assert yaml.safe_load(out)["metadata"]["annotations"]["two-worker-grpo/image"] == "registry.example/verl:0.6"


@pytest.mark.parametrize("knob, value", [
    ("--rdma", "rdma=1"), ("--rdma", "rdma/ib=0"), ("--rdma", "rdma/ib"),
    ("--node-selector", "a b=c"), ("--tolerations", "gpu:Sometimes"), ("--tolerations", "gpu"),
    ("--affinity", "pack"), ("--head-resources", "cpu=lots"), ("--worker-resources", "gpu=8"),
    ("--pull-secrets", "Reg_Cred"), ("--service-account", "UPPER"),
    ("--secret-env", "KEY=only-a-name"), ("--secret-env", "1KEY=s/k"), ("--ipc-lock", "yes"),
    ("--retries", "-1"), ("--retries", "99"),
])
def test_a_malformed_setting_is_one_line_naming_it_and_prints_nothing(capsys, knob, value):
    status, out, err = printed(capsys, knob, value)
    assert status == 2 and out == ""
    assert err.startswith("rayjob: (SUB-E141) RAYJOB_") and " — " not in err
    assert err.splitlines()[1:] == [f"    HINT: {CATALOG['SUB-E141'][1]}"]  # one line and its fix


@pytest.mark.parametrize("text, words", [
    ("spec: &a {}\n", "anchors"), ("spec:\n\ttolerations: []\n", "tabs"),
    ("spec: |\n  x\n", "block scalars"), ("spec: 1\nspec: 2\n", "given twice"),
    ("a: 1\n---\nb: 2\n", "one document"), ("- a\n", "must be a mapping"),
    ("spec:\n  containers: 5\n", "cannot replace"), ("{bad json", "not JSON"),
    ("[" * 100000 + "]" * 100000, "not JSON"), ("spec: " + "[" * 5000 + "]" * 5000 + "\n", "flow value"),
    ("spec: " + "[" * 40 + "]" * 40 + "\n", "deeper than 32"),
    ("x: " + "y" * (300 << 10) + "\n", "larger than 256 KiB"),
])
def test_an_overlay_outside_the_subset_or_the_template_is_refused(capsys, tmp_path, text, words):
    (tmp_path / "o.yaml").write_text(text, encoding="utf-8")
    status, out, err = printed(capsys, "--overlay", str(tmp_path / "o.yaml"))
    assert status == 2 and out == ""
    assert err.startswith("rayjob: (SUB-E142) RAYJOB_OVERLAY=") and words in err


@pytest.mark.parametrize("text", [OVERLAY, SPLIT_OVERLAY, """\
spec:
  containers:
  - name: sidecar   # a second container
    image: "busybox:1.36"
    args: [ "sleep", "infinity" ]
  - env:
    - name: 'A'
      value: 'it''s'
    - name: B
      value: "x # not a comment"
  hostNetwork: false
  terminationGracePeriodSeconds: 120
  x: -1.5
  y: ~
"""])
def test_the_overlay_parser_reads_its_subset_as_yaml_does(text):
    assert overlay.parse(text) == yaml.safe_load(text)


def test_overlay_containers_merge_by_name_and_other_lists_append():
    base = {"spec": {"containers": [{"name": "ray-worker", "env": [{"name": "A", "value": "1"}]}],
                     "tolerations": [{"key": "a"}]}}
    piece = overlay.parse(SPLIT_OVERLAY)["workers"]
    merged = overlay.merge(base, piece)
    assert [c["name"] for c in merged["spec"]["containers"]] == ["ray-worker"]
    assert merged["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"},
                                                      {"name": "NCCL_IB_GID_INDEX", "value": "3"}]
    assert merged["spec"]["tolerations"][0] == {"key": "a"} and len(merged["spec"]["tolerations"]) == 2
    assert base["spec"]["tolerations"] == [{"key": "a"}]  # the base is not changed


def test_the_documented_overlay_reads_as_yaml_and_merges(capsys, validator, tmp_path):  # noqa: F811
    doc = (REPO / "docs" / "other-ways-in.md").read_text(encoding="utf-8")
    text = re.search(r"```yaml\n(.*?)```", doc, re.S).group(1)
    assert overlay.parse(text) == yaml.safe_load(text)
    (tmp_path / "overlay.yaml").write_text(text, encoding="utf-8")
    status, out, err = printed(capsys, "--head-gpus", "0", "--overlay", str(tmp_path / "overlay.yaml"))
    assert status == 0 and errors(validator, yaml.safe_load(out)) == [], err


@pytest.mark.parametrize("profile", ["tutorial-2x2-a100", "smoke-1x1", "smoke-2x1"])
@pytest.mark.parametrize("head_gpus", ["", "0"])
def test_every_profile_with_every_setting_and_the_overlay_is_valid(capsys, validator, tmp_path,  # noqa: F811
                                                                   profile, head_gpus):
    (tmp_path / "overlay.yaml").write_text(SPLIT_OVERLAY, encoding="utf-8")
    status, out, err = printed(capsys, "--profile", profile, "--head-gpus", head_gpus, *PRODUCTION,
                               "--overlay", str(tmp_path / "overlay.yaml"))
    assert status == 0, err
    assert errors(validator, yaml.safe_load(out)) == []


@pytest.mark.parametrize("kind", ["fifo", "missing", "folder"])
def test_an_overlay_that_is_not_a_regular_file_is_refused_at_once(capsys, tmp_path, kind):
    path = tmp_path / "overlay.yaml"
    if kind == "fifo":
        os.mkfifo(path)  # nobody writes: a plain open() would wait forever
    elif kind == "folder":
        path.mkdir()
    status, out, err = printed(capsys, "--overlay", str(path))
    assert status == 2 and out == "" and err.startswith("rayjob: (SUB-E142) RAYJOB_OVERLAY=")

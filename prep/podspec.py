"""make rayjob's pod settings for a production cluster, each a make variable (README, make help).

RAYJOB_RDMA               NAME=COUNT,...  device resources each GPU pod asks for (the name is
                          the cluster's device plugin's, e.g. rdma/rdma_shared_device_a=1 or
                          nvidia.com/hostdev=8); adds the IPC_LOCK capability RDMA needs
RAYJOB_IPC_LOCK           1: IPC_LOCK without RAYJOB_RDMA; 0: never (default: with RAYJOB_RDMA)
RAYJOB_NODE_SELECTOR      key=value,...   node labels every pod needs
RAYJOB_TOLERATIONS        key[=value]:Effect,...   taints every pod tolerates (kubectl taint's
                          form; no value: operator Exists)
RAYJOB_AFFINITY           spread: at most one pod of this job on a node (required pod
                          anti-affinity on kubernetes.io/hostname); anything else: RAYJOB_OVERLAY
RAYJOB_HEAD_RESOURCES     cpu=N,memory=Q  the head pod's requests, equal to its limits (Ray in
RAYJOB_WORKER_RESOURCES   cpu=N,memory=Q  the pod then counts these, not the whole host)
RAYJOB_PULL_SECRETS       name,...        imagePullSecrets of every pod
RAYJOB_SERVICE_ACCOUNT    name            serviceAccountName of every pod
RAYJOB_SECRET_ENV         NAME=secret/key,...   environment variables read from Kubernetes
                          secrets (secretKeyRef): the manifest names the secret, never the value
RAYJOB_OVERLAY            a YAML or JSON file merged into the pod templates (prep/overlay.py)

Every value is checked against Kubernetes' forms before anything is printed (SUB-E141).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Optional

from prep.jobs_api import JobsError

RESOURCE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
LABEL_KEY = RESOURCE
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
SECRET_KEY = re.compile(r"^[-._A-Za-z0-9]{1,253}\Z")
QUANTITY = re.compile(r"^([0-9]+(\.[0-9]+)?)(m|k|M|G|T|P|Ki|Mi|Gi|Ti|Pi)?\Z")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
AFFINITIES = ("", "spread")
JOB_LABEL = "two-worker-grpo/run"


def bad(knob: str, value: str, want: str) -> JobsError:
    return JobsError("SUB-E141", f"{knob}={value!r}: {want}")


def pairs(knob: str, text: str, sep: str = "=") -> List[List[str]]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if any(sep not in item for item in items):
        raise bad(knob, text, f"write NAME{sep}VALUE items, separated by commas")
    return [item.split(sep, 1) for item in items]


@dataclasses.dataclass
class PodSettings:
    rdma: Dict[str, int] = dataclasses.field(default_factory=dict)
    ipc_lock: bool = False
    node_selector: Dict[str, str] = dataclasses.field(default_factory=dict)
    tolerations: List[dict] = dataclasses.field(default_factory=list)
    spread: bool = False
    head_resources: Dict[str, str] = dataclasses.field(default_factory=dict)
    worker_resources: Dict[str, str] = dataclasses.field(default_factory=dict)
    pull_secrets: List[str] = dataclasses.field(default_factory=list)
    service_account: str = ""
    secret_env: List[dict] = dataclasses.field(default_factory=list)


def parse_rdma(text: str) -> Dict[str, int]:
    out = {}
    for name, count in pairs("RAYJOB_RDMA", text):
        if not RESOURCE.match(name) or "/" not in name or not count.isdigit() or int(count) < 1:
            raise bad("RAYJOB_RDMA", text, "each item is <vendor/resource>=<count of at least 1>, "
                      "the name as the cluster's device plugin advertises it")
        out[name] = int(count)
    return out


def parse_tolerations(text: str) -> List[dict]:
    out = []
    for item in [i.strip() for i in text.split(",") if i.strip()]:
        head, _, effect = item.rpartition(":")
        key, has_value, value = head.partition("=")
        if effect not in EFFECTS or not LABEL_KEY.match(key) or not LABEL_VALUE.match(value):
            raise bad("RAYJOB_TOLERATIONS", text, "each item is key[=value]:Effect, Effect one of "
                      + ", ".join(EFFECTS))
        entry = {"key": key, "operator": "Equal" if has_value else "Exists", "effect": effect}
        if has_value:
            entry["value"] = value
        out.append(entry)
    return out


def parse_resources(knob: str, text: str) -> Dict[str, str]:
    out = {}
    for name, quantity in pairs(knob, text):
        if name not in ("cpu", "memory") or not QUANTITY.match(quantity) or name in out:
            raise bad(knob, text, "write cpu=<cores, e.g. 16 or 500m>,memory=<e.g. 256Gi>")
        out[name] = quantity
    return out


def parse_secret_env(text: str) -> List[dict]:
    out = []
    for name, ref in pairs("RAYJOB_SECRET_ENV", text):
        secret, _, key = ref.partition("/")
        if not ENV_NAME.match(name) or not DNS_NAME.match(secret) or not SECRET_KEY.match(key):
            raise bad("RAYJOB_SECRET_ENV", text, "each item is NAME=<secret name>/<key in it>")
        out.append({"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
    return out


def settings(rdma="", ipc_lock="", node_selector="", tolerations="", affinity="",
             head_resources="", worker_resources="", pull_secrets="", service_account="",
             secret_env="") -> PodSettings:
    s = PodSettings(rdma=parse_rdma(rdma), tolerations=parse_tolerations(tolerations),
                    head_resources=parse_resources("RAYJOB_HEAD_RESOURCES", head_resources),
                    worker_resources=parse_resources("RAYJOB_WORKER_RESOURCES", worker_resources),
                    secret_env=parse_secret_env(secret_env))
    if ipc_lock not in ("", "0", "1"):
        raise bad("RAYJOB_IPC_LOCK", ipc_lock, "1 (add IPC_LOCK), 0 (never) or empty")
    s.ipc_lock = ipc_lock == "1" or (ipc_lock == "" and bool(s.rdma))
    for key, value in pairs("RAYJOB_NODE_SELECTOR", node_selector):
        if not LABEL_KEY.match(key) or not LABEL_VALUE.match(value):
            raise bad("RAYJOB_NODE_SELECTOR", node_selector, "each item is <label key>=<value>")
        s.node_selector[key] = value
    if affinity not in AFFINITIES:
        raise bad("RAYJOB_AFFINITY", affinity, "spread, or empty; other affinities go in RAYJOB_OVERLAY")
    s.spread = affinity == "spread"
    s.pull_secrets = [n.strip() for n in pull_secrets.split(",") if n.strip()]
    for name in [*s.pull_secrets, *([service_account] if service_account else [])]:
        if not DNS_NAME.match(name):
            raise bad("RAYJOB_PULL_SECRETS or RAYJOB_SERVICE_ACCOUNT", name, "a Kubernetes name")
    s.service_account = service_account
    return s


def apply(pod: dict, s: PodSettings, gpus: int, role: str, run_label: str) -> dict:
    """The settings written into one pod template (the Ray container is the first)."""
    spec, container = pod["spec"], pod["spec"]["containers"][0]
    pod.setdefault("metadata", {})["labels"] = {JOB_LABEL: run_label}
    quantities: Dict[str, object] = dict(s.head_resources if role == "head" else s.worker_resources)
    if gpus:
        quantities.update({"nvidia.com/gpu": gpus, **s.rdma})
    if quantities:  # requests equal limits: a Guaranteed pod, whose size Ray counts
        container["resources"] = {"limits": dict(quantities), "requests": dict(quantities)}
    if s.ipc_lock and gpus:
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    if s.secret_env:
        container["env"] = [dict(e) for e in s.secret_env]
    if s.node_selector:
        spec["nodeSelector"] = dict(s.node_selector)
    if s.tolerations:
        spec["tolerations"] = [dict(t) for t in s.tolerations]
    if s.spread:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {JOB_LABEL: run_label}},
             "topologyKey": "kubernetes.io/hostname"}]}}
    if s.pull_secrets:
        spec["imagePullSecrets"] = [{"name": n} for n in s.pull_secrets]
    if s.service_account:
        spec["serviceAccountName"] = s.service_account
    return pod


SECRET_WORDS = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH)", re.I)


def secret_like(variables: Dict[str, str]) -> Optional[str]:
    """A job variable whose name says it holds a secret (its value would be printed)."""
    for name, value in variables.items():
        if value and SECRET_WORDS.search(name):
            return name
    return None

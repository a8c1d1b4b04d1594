#!/usr/bin/env python3
"""Summary: Print a KubeRay RayJob (ray.io/v1) that runs one RUN_ID of a profile on Kubernetes.

Usage: prep/rayjob.py --run-id ID [--profile NAME] [--storage-root DIR] [--image IMAGE]
                      [--claim PVC] [--head-gpus N] [--bundle DIR] [--var KEY=VALUE]...
                      [--rdma ...] [--ipc-lock ...] [--node-selector ...] [--tolerations ...]
                      [--affinity ...] [--head-resources ...] [--worker-resources ...]
                      [--pull-secrets ...] [--service-account ...] [--secret-env ...]
                      [--overlay FILE] [--retries N]

The RayJob brings up a Ray cluster of the profile's topology (the head is one of its GPU nodes,
or a CPU-only head with --head-gpus 0, which preflight records and does not count), mounts the
shared volume claim at STORAGE_ROOT on every pod, and submits the same entrypoint and RuntimeEnv
as `make submit` through the head's job server (submissionMode HTTPMode: no shell or CLI quoting
in between), with jobId = RUN_ID. The pod settings for a production cluster (RDMA devices,
IPC_LOCK, placement, sizes, pull secrets, service account, variables from secrets) are
prep/podspec.py's; an overlay file merges in the rest (prep/overlay.py). When the profile saves
checkpoints, KubeRay retries a failed job (backoffLimit) and the launcher makes each retry the
next attempt, <RUN_ID>.2, ..., resuming from the newest complete checkpoint (RESUME_FROM=auto).
Exit codes: 0 printed; 2 usage error.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from prep import jobspec, overlay, podspec, site, yamltext  # noqa: E402
from prep.submit import job_variables  # noqa: E402
from prep.jobs_api import JobsError  # noqa: E402
from twgrpo.formats import bounded  # noqa: E402
from twgrpo.run.findings import UsageError, say_usage, usage  # noqa: E402
from twgrpo.run.profile import DEFAULT_PROFILE  # noqa: E402

VOLUME = "shared-volume"
MAX_NAME = 47  # KubeRay refuses longer RayJob names (it derives cluster and service names)
KEEP_S = 300  # seconds the finished cluster stays, for kubectl logs; the run's files are on the volume
DEFAULT_RETRIES = 2  # retries of a job whose profile saves checkpoints (each resumes)
IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*\Z")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
CLAIM = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")
IMAGE_VARIABLE = "TWGRPO_IMAGE"  # the image reference, recorded in run.json by the launcher


def k8s_name(run_id: str) -> str:
    """A DNS-1035 label of at most MAX_NAME characters for RUN_ID (jobId keeps RUN_ID exact)."""
    name = re.sub(r"[^a-z0-9-]", "-", run_id.lower()).strip("-")
    if not name[:1].isalpha():
        name = f"run-{name}"
    if name != run_id or len(name) > MAX_NAME:  # a changed name keeps a hash of the RUN_ID
        digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8]
        name = f"{name[:MAX_NAME - 9].rstrip('-')}-{digest}"
    return name


def pod(role: str, image: str, storage_root: str, claim: str) -> dict:
    container = {"name": f"ray-{role}", "image": image,
                 "volumeMounts": [{"name": VOLUME, "mountPath": storage_root},
                                  {"name": "dshm", "mountPath": "/dev/shm"}]}
    return {"spec": {"containers": [container],
                     "volumes": [{"name": VOLUME, "persistentVolumeClaim": {"claimName": claim}},
                                 {"name": "dshm", "emptyDir": {"medium": "Memory"}}]}}


def manifest(spec: dict, nodes: int, gpus_per_node: int, head_gpus: int, image: str,
             claim: str, storage_root: str, profile_name: str, retries: int,
             settings: podspec.PodSettings, pieces=({}, {})) -> dict:
    run_id = spec["submission_id"]
    name = k8s_name(run_id)
    workers = nodes - 1 if head_gpus else nodes
    head_params = {} if head_gpus else {"num-gpus": "0"}
    head = podspec.apply(pod("head", image, storage_root, claim), settings, head_gpus, "head", name)
    cluster = {"headGroupSpec": {"rayStartParams": head_params,
                                 "template": overlay.merge(head, pieces[0])}}
    if workers:
        worker = podspec.apply(pod("worker", image, storage_root, claim), settings, gpus_per_node,
                               "worker", name)
        cluster["workerGroupSpecs"] = [{
            "groupName": "gpu-workers", "replicas": workers, "minReplicas": workers,
            "maxReplicas": workers, "rayStartParams": {},
            "template": overlay.merge(worker, pieces[1])}]
    return {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name,
                     "labels": {"app.kubernetes.io/name": "two-worker-grpo",
                                "two-worker-grpo/profile": profile_name},
                     "annotations": {"two-worker-grpo/run-id": run_id,
                                     "two-worker-grpo/image": image}},
        "spec": {"jobId": run_id, "submissionMode": "HTTPMode",
                 "entrypoint": spec["entrypoint"],
                 "runtimeEnvYAML": json.dumps(spec["runtime_env"], indent=2),
                 "shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": KEEP_S,
                 "backoffLimit": retries, "rayClusterSpec": cluster}}


def head_gpu_count(text: str, gpus_per_node: int) -> int:
    if text == "":
        return gpus_per_node
    if text not in ("0", str(gpus_per_node)):
        raise JobsError("SUB-E020", f"RAYJOB_HEAD_GPUS={text!r}: a head holds the profile's "
                        f"{gpus_per_node} GPUs (empty) or none (0)")
    return int(text)


def retry_count(text: str, save_freq: str) -> int:
    """backoffLimit: RAYJOB_RETRIES, else DEFAULT_RETRIES when checkpoints are saved, else 0
    (a retry without a checkpoint would start over)."""
    if text == "":
        return DEFAULT_RETRIES if save_freq.isdigit() and int(save_freq) > 0 else 0
    if not text.isdigit() or int(text) > 20:
        raise podspec.bad("RAYJOB_RETRIES", text, "a whole number from 0 to 20")
    return int(text)


def read_overlay(path: str):
    """(head piece, workers piece) from the overlay file; ({}, {}) without one."""
    if not path:
        return {}, {}
    try:
        stream, _ = bounded.open_regular(path)  # a FIFO or device in its place never blocks
        with stream:
            data = stream.read(overlay.MAX_BYTES + 1)
        return overlay.pieces(overlay.parse(data.decode("utf-8")))
    except (OSError, UnicodeDecodeError, overlay.OverlayError) as exc:
        raise JobsError("SUB-E142", f"RAYJOB_OVERLAY={path}: {exc}") from None


def comment_lines(args, profile, head_gpus: int, retries: int, digest: bool):
    lines = [f"A KubeRay RayJob for run {args.run_id}, profile {profile.PROFILE_NAME}: "
             f"{profile.NODES} GPU node(s) x {profile.GPUS_PER_NODE} GPU(s)"
             + (", and a CPU-only head (preflight records it, counts only the GPU nodes)."
                if not head_gpus else "; the head is one of them."),
             "Printed by `make rayjob`; apply with: kubectl apply -f <this file>",
             f"The volume claim {args.claim} is mounted at {args.storage_root} on every pod."]
    if retries:
        lines += [f"KubeRay retries a failed job up to {retries} time(s) (backoffLimit): each retry",
                  f"is the launcher's next attempt ({args.run_id}.2, ...), resuming from the newest",
                  "complete checkpoint (RESUME_FROM=auto); a run that failed a check is not retried."]
    else:
        lines += ["Retries are off (backoffLimit: 0): the profile saves no checkpoint to resume from.",
                  "To continue a preempted run, print a new RayJob with a new RUN_ID and",
                  "RESUME_FROM=<the preempted RUN_ID>, and apply it."]
    if not digest:
        tagged = usage("SUB-W002", None, "the image is named by tag, which can move")
        lines.append(f"Warning {tagged}: {tagged.hint}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="prep/rayjob.py", description=__doc__.splitlines()[0])
    parser.add_argument("--run-id", default="")
    parser.add_argument("--profile", default="")
    parser.add_argument("--storage-root", default=jobspec.bundle.DEFAULT_JOB_ROOT)
    parser.add_argument("--image", default="")
    parser.add_argument("--claim", default="")
    parser.add_argument("--head-gpus", default="")
    parser.add_argument("--bundle", default="", help="the bundle folder (default: this checkout's)")
    parser.add_argument("--var", action="append", default=[], metavar="KEY=VALUE")
    for knob in ("rdma", "ipc-lock", "node-selector", "tolerations", "affinity", "head-resources",
                 "worker-resources", "pull-secrets", "service-account", "secret-env", "overlay",
                 "retries"):
        parser.add_argument(f"--{knob}", default="", help=f"RAYJOB_{knob.upper().replace('-', '_')}")
    args = parser.parse_args(argv)
    try:
        if not IMAGE.match(args.image):
            raise JobsError("SUB-E021", f"RAYJOB_IMAGE={args.image!r} is not an image reference")
        if not CLAIM.match(args.claim):
            raise JobsError("SUB-E021", f"RAYJOB_CLAIM={args.claim!r} is not a claim name")
        settings = podspec.settings(
            args.rdma, args.ipc_lock, args.node_selector, args.tolerations, args.affinity,
            args.head_resources, args.worker_resources, args.pull_secrets, args.service_account,
            args.secret_env)
        pieces = read_overlay(args.overlay)
        bundle_dir = Path(args.bundle) if args.bundle else jobspec.bundle.BUNDLE
        variables = job_variables(args.var)
        secret = podspec.secret_like(variables)
        if secret:
            raise JobsError("SUB-E140", f"JOB_ENV sets {secret}, whose value would be printed in the "
                            "manifest")
        variables.update({"RUN_ID": args.run_id, IMAGE_VARIABLE: args.image})
        spec = jobspec.job_spec(args.storage_root, args.profile, bundle_dir, variables)
        profile = site.profile_of(bundle_dir, args.profile, DEFAULT_PROFILE)
        head_gpus = head_gpu_count(args.head_gpus, profile.GPUS_PER_NODE)
        retries = retry_count(args.retries, variables.get("SAVE_FREQ") or str(profile.SAVE_FREQ))
        if retries and not variables.get("RESUME_FROM"):  # each retry resumes its attempts
            spec["runtime_env"]["env_vars"]["RESUME_FROM"] = "auto"
        document = manifest(spec, profile.NODES, profile.GPUS_PER_NODE, head_gpus, args.image,
                            args.claim, args.storage_root, profile.PROFILE_NAME, retries,
                            settings, pieces)
    except overlay.OverlayError as exc:
        say_usage("rayjob", usage("SUB-E142", None, f"RAYJOB_OVERLAY={args.overlay}: {exc}"))
        return 2
    except (JobsError, jobspec.SpecError, UsageError) as exc:
        say_usage("rayjob", exc)
        return 2
    digest = bool(DIGEST.search(args.image))
    if not digest:
        say_usage("rayjob", usage("SUB-W002", None, f"RAYJOB_IMAGE={args.image} is a tag, which "
                                  "can move to another image"))
    comments = comment_lines(args, profile, head_gpus, retries, digest)
    sys.stdout.write(yamltext.dump(document, comments))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

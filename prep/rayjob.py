#!/usr/bin/env python3
"""Summary: Print a KubeRay RayJob (ray.io/v1) that runs one RUN_ID of a profile on Kubernetes.

Usage: prep/rayjob.py --run-id ID [--profile NAME] [--storage-root DIR] [--image IMAGE]
                      [--claim PVC] [--head-gpus N] [--bundle DIR] [--var KEY=VALUE]...

The RayJob brings up a Ray cluster of the profile's topology (the head is one of its GPU nodes,
or a CPU-only head with --head-gpus 0), mounts the shared volume claim at STORAGE_ROOT on every
pod, and submits the same entrypoint and RuntimeEnv as `make submit` through the head's job
server (submissionMode HTTPMode: no shell or CLI quoting in between), with jobId = RUN_ID.
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
from prep import jobspec, yamltext  # noqa: E402
from prep.submit import job_variables  # noqa: E402
from prep.jobs_api import JobsError  # noqa: E402
from twgrpo.run.findings import UsageError  # noqa: E402
from twgrpo.run.profile import DEFAULT_PROFILE, load_profile  # noqa: E402

VOLUME = "shared-volume"
MAX_NAME = 47  # KubeRay refuses longer RayJob names (it derives cluster and service names)
KEEP_S = 300  # seconds the finished cluster stays, for kubectl logs; the run's files are on the volume
RETRIES_OFF = ("Retries are off (backoffLimit: 0): a retry would start the same RUN_ID again,",
               "which the launcher refuses (LAUNCH-E008: a run folder is never reused), and",
               "automatic resume is not built yet. To continue a preempted run, print a new RayJob",
               "with a new RUN_ID and RESUME_FROM=<the preempted RUN_ID>, and apply it.")
IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
CLAIM = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def k8s_name(run_id: str) -> str:
    """A DNS-1035 label of at most MAX_NAME characters for RUN_ID (jobId keeps RUN_ID exact)."""
    name = re.sub(r"[^a-z0-9-]", "-", run_id.lower()).strip("-")
    if not name[:1].isalpha():
        name = f"run-{name}"
    if name != run_id or len(name) > MAX_NAME:  # a changed name keeps a hash of the RUN_ID
        digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8]
        name = f"{name[:MAX_NAME - 9].rstrip('-')}-{digest}"
    return name


def pod(role: str, image: str, gpus: int, storage_root: str, claim: str) -> dict:
    container = {"name": f"ray-{role}", "image": image,
                 "volumeMounts": [{"name": VOLUME, "mountPath": storage_root},
                                  {"name": "dshm", "mountPath": "/dev/shm"}]}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return {"spec": {"containers": [container],
                     "volumes": [{"name": VOLUME, "persistentVolumeClaim": {"claimName": claim}},
                                 {"name": "dshm", "emptyDir": {"medium": "Memory"}}]}}


def manifest(spec: dict, nodes: int, gpus_per_node: int, head_gpus: int, image: str,
             claim: str, storage_root: str, profile_name: str) -> dict:
    workers = nodes - 1 if head_gpus else nodes
    head_params = {} if head_gpus else {"num-gpus": "0"}
    cluster = {"headGroupSpec": {"rayStartParams": head_params,
                                 "template": pod("head", image, head_gpus, storage_root, claim)}}
    if workers:
        cluster["workerGroupSpecs"] = [{
            "groupName": "gpu-workers", "replicas": workers, "minReplicas": workers,
            "maxReplicas": workers, "rayStartParams": {},
            "template": pod("worker", image, gpus_per_node, storage_root, claim)}]
    run_id = spec["submission_id"]
    return {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": k8s_name(run_id),
                     "labels": {"app.kubernetes.io/name": "two-worker-grpo",
                                "two-worker-grpo/profile": profile_name},
                     "annotations": {"two-worker-grpo/run-id": run_id}},
        "spec": {"jobId": run_id, "submissionMode": "HTTPMode",
                 "entrypoint": spec["entrypoint"],
                 "runtimeEnvYAML": json.dumps(spec["runtime_env"], indent=2),
                 "shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": KEEP_S,
                 "backoffLimit": 0, "rayClusterSpec": cluster}}


def head_gpu_count(text: str, gpus_per_node: int) -> int:
    if text == "":
        return gpus_per_node
    if text not in ("0", str(gpus_per_node)):
        raise JobsError("SUB-E020", f"RAYJOB_HEAD_GPUS={text!r}: a head holds the profile's "
                        f"{gpus_per_node} GPUs (empty) or none (0) — set RAYJOB_HEAD_GPUS= or 0")
    return int(text)


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
    args = parser.parse_args(argv)
    try:
        if not IMAGE.match(args.image):
            raise JobsError("SUB-E021", f"RAYJOB_IMAGE={args.image!r} is not an image reference "
                            "— set RAYJOB_IMAGE=<registry/verl image:tag>")
        if not CLAIM.match(args.claim):
            raise JobsError("SUB-E021", f"RAYJOB_CLAIM={args.claim!r} is not a claim name — set "
                            "RAYJOB_CLAIM=<the shared volume's PersistentVolumeClaim>")
        bundle_dir = Path(args.bundle) if args.bundle else jobspec.bundle.BUNDLE
        variables = job_variables(args.var)
        variables["RUN_ID"] = args.run_id
        spec = jobspec.job_spec(args.storage_root, args.profile, bundle_dir, variables)
        name = args.profile or DEFAULT_PROFILE
        profile = load_profile(str(bundle_dir / "profiles" / f"{name}.env"))
        head_gpus = head_gpu_count(args.head_gpus, profile.GPUS_PER_NODE)
    except (JobsError, jobspec.SpecError, UsageError) as exc:
        print(f"rayjob: {exc}", file=sys.stderr)
        return 2
    comments = [f"A KubeRay RayJob for run {args.run_id}, profile {profile.PROFILE_NAME}: "
                f"{profile.NODES} node(s) x {profile.GPUS_PER_NODE} GPU(s).",
                "Printed by `make rayjob`; apply with: kubectl apply -f <this file>",
                f"The volume claim {args.claim} is mounted at {args.storage_root} on every pod.",
                *RETRIES_OFF]
    if not head_gpus:
        note = ("a CPU-only head is one more Ray node, and today's preflight expects exactly the "
                f"profile's NODES={profile.NODES}, each with GPUS_PER_NODE GPUs (PRE-E012): it "
                "needs a profile that describes a CPU-only head")
        comments.append(f"Note: {note}.")
        print(f"rayjob: {note}", file=sys.stderr)
    document = manifest(spec, profile.NODES, profile.GPUS_PER_NODE, head_gpus, args.image,
                        args.claim, args.storage_root, profile.PROFILE_NAME)
    sys.stdout.write(yamltext.dump(document, comments))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

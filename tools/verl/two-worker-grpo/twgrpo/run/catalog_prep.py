"""Finding ids of the prep box (make submit, rayjob, sbatch) and make smoke's environment (SUB, SLURM, ENV): id -> (what it means, what to do).

twgrpo/run/catalog.py joins the parts into CATALOG in the order docs/findings.md lists them."""
ENTRIES = {
    # make submit, stop, logs (the Ray Jobs REST API) and make rayjob, on the prep box
    "SUB-E001": ("RAY_ADDRESS is not set", "Set RAY_ADDRESS=http://<head>:8265, the address of the head's dashboard, which serves the Ray job API."),
    "SUB-E002": ("RAY_ADDRESS is not the job server's http:// address", "Use http://<head>:8265 (the dashboard port), not the GCS port (6379), not ray://<head>:10001 (Ray Client), and no path."),
    "SUB-E003": ("the Ray job server cannot be reached", "Check the host and port in RAY_ADDRESS, that the head runs with its dashboard (ray[default]), and that this box can reach it (firewall, port-forward)."),
    "SUB-E004": ("the address answers, but not as a Ray job server", "Point RAY_ADDRESS at the head's dashboard, http://<head>:8265; a proxy in between must pass /api/ through."),
    "SUB-E005": ("the RUN_ID was already submitted to this cluster", "Set a new RUN_ID for every run, clone or retry (the submission id is the RUN_ID); make logs RUN_ID=... shows the earlier one."),
    "SUB-E006": ("the job server refused a request", "The message carries the server's reason: fix it (often a RuntimeEnv the cluster cannot set up) and submit again with a new RUN_ID."),
    "SUB-E007": ("the cluster has no job with that RUN_ID", "Check RUN_ID and RAY_ADDRESS: a job is known only to the cluster it was submitted to, while that cluster lives."),
    "SUB-E010": ("the bundle cannot make the Driver command or RuntimeEnv", "Set PROFILE= to a profile of the bundle and STORAGE_ROOT= to the job's mount path (letters, digits, '/', '.', '_', '-')."),
    "SUB-E011": ("a job variable cannot be set", "Write JOB_ENV=\"NAME=value ...\" with plain values; PROFILE and STORAGE_ROOT are make knobs, and the RuntimeEnv's pinned variables cannot be changed."),
    "SUB-E012": ("RUN_ID is missing or malformed", "Set RUN_ID=<a new name>: at most 128 of [A-Za-z0-9._-], starting with a letter or digit."),
    "SUB-E013": ("the run folder already exists on PREP_ROOT", "Set a new RUN_ID: a run folder is never reused (the launcher would refuse it, LAUNCH-E008)."),
    "SUB-E014": ("a stopped job did not end in time", "Ray sends TERM, then KILL after RAY_JOB_STOP_WAIT_TIME_S: see make logs RUN_ID=... and the Ray dashboard; run make stop again."),
    "SUB-E015": ("a job variable configures the shell", "BASH_ENV, ENV, SHELLOPTS, BASHOPTS, PS4, POSIXLY_CORRECT, BASH_FUNC_* and the like act on the shell before the Driver command's first line: leave them out of JOB_ENV."),
    "SUB-E020": ("RAYJOB_HEAD_GPUS is neither empty nor 0", "Leave RAYJOB_HEAD_GPUS empty for a head holding the profile's GPUS_PER_NODE GPUs, or set 0 for a CPU-only head."),
    "SUB-E021": ("RAYJOB_IMAGE or RAYJOB_CLAIM is malformed", "Set RAYJOB_IMAGE to the verl image reference and RAYJOB_CLAIM to the shared volume's PersistentVolumeClaim name."),
    # make smoke's environment (dev/smoke-env.py), on the machine that runs the smoke: before anything is written
    "ENV-E001": ("no NVIDIA GPU or driver", "Run make smoke on a machine with one NVIDIA GPU whose nvidia-smi lists it; make test covers the rest without one."),
    "ENV-E002": ("the base Python's torch is missing a piece or too old", "Use a Python whose torch is in the lock's range (dev/smokeenv/lock.txt, '#! base torch'): PYTHON=/path/to/python3 make smoke, or upgrade torch."),
    "ENV-E003": ("torch cannot use this machine's GPU", "torch must be a CUDA build for a CUDA major version the driver supports (nvidia-smi prints 'CUDA Version'): install a matching torch, or update the driver."),
    "ENV-E004": ("the package index cannot be reached", "Give a folder of wheels instead: make wheelhouse WHEELHOUSE=<dir> on a machine with network, carry it here, then make smoke WHEELHOUSE=<dir>."),
    "ENV-E005": ("not enough free disk for the environment", "Free space in the checkout (the venv is .smoke-env/), or run from a checkout on a larger disk."),
    "ENV-E006": ("the wheelhouse lacks pins the environment needs", "Fill it again with make wheelhouse WHEELHOUSE=<dir> (for this machine's Python version: WHEELHOUSE_PYTHON=3.X), or add the files named."),
    "ENV-E007": ("a wheelhouse file differs from the lock's hash", "The file is not the one the lock pins (changed, or another build): delete it and fill the wheelhouse again with make wheelhouse."),
    "ENV-E008": ("pip or venv failed while building the environment", "The message quotes pip's last lines; the half-built .smoke-env/ was removed. Fix what pip names and run make smoke again."),
    "ENV-E009": ("the environment is not a working stack", "A package is outside its lock range or a module does not import (the message names it): rm -rf .smoke-env and run make smoke again, or fix the base Python."),
    "ENV-E010": ("the environment folder exists and was not made by make smoke", "Move that folder away, or let make smoke use another: SMOKE_ENV=<new folder>."),
    "ENV-E011": ("WHEELHOUSE names no folder", "Set WHEELHOUSE to a folder of wheels (several joined by ':'), as made by make wheelhouse."),
    "ENV-E012": ("the base Python cannot be run", "Set PYTHON to a working python3 (3.8 or newer)."),
    "ENV-E013": ("make wheelhouse could not download the lock's files", "The message quotes pip: a hash mismatch means the index serves other bytes than dev/smokeenv/lock.txt pins (after a deliberate change of pins.txt, run make smoke-lock); otherwise check the network or the index settings."),
    # make submit's checks on PREP_ROOT before anything is sent (prep/precheck.py)
    "SUB-W001": ("PREP_ROOT is not mounted: nothing was checked before sending", "Set PREP_ROOT= to this box's mount of the job's volume, so make submit can check the installed bundle, the profile, RESUME_FROM and RUN_ID before the cluster sees the job."),
    "SUB-E130": ("the bundle version the Driver command pins is not installed", "Run make install-tools PREP_ROOT=<this box's mount>, then submit again (re-copying the Driver command prints the same version)."),
    "SUB-E131": ("the profile sent is not the installed one", "The profile was edited after it was installed: for a bundle profile run make checksums, then make install-tools; for a site profile make install-tools SITE=<folder>; then submit again."),
    "SUB-E132": ("RESUME_FROM names no earlier run on PREP_ROOT", "Set RESUME_FROM to the RUN_ID of a preempted run of this volume (make runs lists them), to auto, or leave it empty."),
    "SUB-E133": ("RESUME_FROM's run has no complete checkpoint to resume", "Resume a run that saved a complete checkpoint (SAVE_FREQ=<N>), or start a new run without RESUME_FROM; the message names what is missing."),
    "SUB-E134": ("make logs FOLLOW=1: the run folder does not appear", "Without RAY_ADDRESS the run is followed from its folder on PREP_ROOT: check RUN_ID and PREP_ROOT, and that the job (RayJob, Slurm) has started; with RAY_ADDRESS the job server is asked instead."),
    "SUB-E135": ("make logs FOLLOW=1: no RAY_ADDRESS, and PREP_ROOT is not mounted here", "Set RAY_ADDRESS=http://<head>:8265 to follow a run submitted to a job server, or PREP_ROOT= to this box's mount of the volume to follow a run (RayJob, Slurm) from its folder."),
    # make rayjob's production settings (prep/podspec.py, prep/overlay.py)
    "SUB-W002": ("RAYJOB_IMAGE names the image by tag", "A tag can move to another image between runs: pin the image by digest, RAYJOB_IMAGE=<name>@sha256:<digest> (docker buildx imagetools inspect <name:tag> prints it)."),
    "SUB-E140": ("JOB_ENV sets a secret that would be printed in the manifest", "Keep the value in a Kubernetes secret and name it: RAYJOB_SECRET_ENV=NAME=<secret>/<key> (the pods read it through secretKeyRef)."),
    "SUB-E141": ("a RayJob setting is malformed", "The message names the knob and the form it takes (README's Other ways in, or make help); fix it or leave it empty."),
    "SUB-E142": ("RAYJOB_OVERLAY cannot be read or merged", "Write a pod template piece (spec: ...; or head: and workers: pieces) in JSON or the YAML subset prep/overlay.py describes; the message names the line or the path."),
    # make sbatch's batch script on the Slurm allocation (prep/slurm-job.bash) and its settings
    "SLURM-E001": ("a node of the allocation did not join the Ray cluster in time", "The message names the nodes: read their Ray log (twgrpo-<job id>/ray-<node>.log beside the job's output); check that they reach the head's address and port, have ray in the image, and raise SLURM_JOIN_TIMEOUT for slow image pulls."),
    "SLURM-E002": ("the allocation has another number of nodes than the profile", "Submit the script as make sbatch printed it (its #SBATCH --nodes line is the profile's NODES), or print it again for this profile."),
    "SLURM-E003": ("the batch script was run outside a Slurm job", "Submit it with sbatch <file>; it needs the allocation's SLURM_JOB_ID and node list."),
    "SLURM-E004": ("a make sbatch setting is malformed", "The message names the setting (SLURM_PARTITION, SLURM_ACCOUNT, SLURM_TIME, SLURM_GPUS, SLURM_CONTAINER, SLURM_IMAGE, SLURM_JOIN_TIMEOUT) and its form; fix it or leave it empty."),
}

# The two-worker GRPO bundle: `make help` lists every target. Recipes are one line that
# calls a script; the logic lives in tools/, prep/, dev/ and tests/, where it is tested.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
MAKEFLAGS += --warn-undefined-variables --no-builtin-rules
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
.SUFFIXES:

##@ Knobs (set on the command line, e.g. make verify-inputs PREP_ROOT=/mnt/my-volume)
PREP_ROOT ?= /mnt/rlinf-reproduction# where THIS box mounts the shared volume (the tutorial's prep-box path)
STORAGE_ROOT ?= /mnt/verl-reproduction# where the training JOB mounts the same volume (pasted text, submit, rayjob)
PROFILE ?=# a profile in tools/verl/two-worker-grpo/profiles/ (empty: tutorial-2x2-a100), or with SITE one in SITE
SITE ?=# your site's folder of profiles, outside the checkout: PROFILE=<name> is SITE/<name>.env (never hashed into the bundle)
RUN_ID ?=# the run to check afterwards, e.g. make postflight RUN_ID=exp-001
REPORT_HTML ?=# make report: write the page here instead of report.html in the run folder
REPORT_REFERENCE ?=# make report: a run beside RUN_ID drawn as a second series (default: a resumed run's parent; none: no reference)
AGAINST ?=# make compare: the reference run(s) RUN_ID is compared with, space-separated
TOLERANCE ?=# make compare: relative tolerance of a metric's end value, e.g. 0.05 or 5% (empty: 5%)
COMPARE_HTML ?=# make compare: write the page here (empty: runs/verl/two-worker-grpo-compare/<run>-vs-<reference>.html)
FORMAT ?= text# make runs, compare, verify-inputs, check-profile, postflight, audit: text, or json for scripts
KEEP ?=# make prune: how many of the most recently installed bundle versions to keep (at least 1)
FORCE ?=# FORCE=1 lets pin-inputs replace files that differ (installed bundle versions are never replaced)
FROM ?=# make new-profile: the profile to start from (empty: tutorial-2x2-a100)
NAME ?=# make new-profile: the new profile's name; make pin-inputs: write into this profile instead
VERL_MIRROR ?=# prepare-inputs: clone verl from this URL or local path (default: the profile's)
MODEL_SOURCE ?=# prepare-inputs: copy the model from this folder (default: ModelScope)
GSM8K_SOURCE ?=# prepare-inputs: convert GSM8K from this folder (default: Hugging Face)
DATA_SOURCE ?=# prepare-inputs with the profile's DATA_CONVERTER: its second argument (a file or folder), e.g. /data/arith-csv
SMOKE_ROOT ?= $(CURDIR)/.smoke# make smoke's self-contained storage root
DEMO_ROOT ?= $(CURDIR)/.demo# make demo's scratch volume (made afresh on every run)
SMOKE_ENV ?= $(CURDIR)/.smoke-env# smokes: the venv built from dev/smokeenv/lock.txt when python3 lacks verl's packages
WHEELHOUSE ?=# smokes: install the environment from this folder of wheels only (no network); make wheelhouse: fill it
WHEELHOUSE_PYTHON ?= 3.12# make wheelhouse: the CPython version of the machine that will use it
PYTHON ?= python3# the Python that runs the tools (3.8 or newer, standard library only)
RAY_ADDRESS ?=# submit, stop, logs: the head's job server, e.g. http://10.0.0.5:8265
SAVE_FREQ ?=# submit: a checkpoint every N steps (empty: the profile's)
RESUME_FROM ?=# submit: continue this preempted run's RUN_ID under the new RUN_ID
FOLLOW ?=# logs: FOLLOW=1 follows the run to its verdict, with its phase, step, pace, ETA and heartbeat (no RAY_ADDRESS: from PREP_ROOT)
JOB_ENV ?=# submit, rayjob, sbatch: more job variables, e.g. JOB_ENV="KILL_GRACE=30 PROBE_TIMEOUT=300"
SUBMIT_BUNDLE ?=# submit, rayjob, sbatch: the bundle whose launcher and profiles to use (empty: this checkout's)
RAYJOB_IMAGE ?= cr.infini-ai.com/infini-ai/verl:app-verl0.6-transformers4.56.1-sglang0.5.2-mcore0.13.0-te2.2# rayjob: the verl image of every pod; pin it by digest, <name>@sha256:<digest> (a tag is warned about)
RAYJOB_CLAIM ?= verl-reproduction# rayjob: the PersistentVolumeClaim of the shared volume
RAYJOB_HEAD_GPUS ?=# rayjob: GPUs of the head pod (empty: the profile's GPUS_PER_NODE; 0: CPU-only head)
RAYJOB_RDMA ?=# rayjob: RDMA device resources per GPU pod, the cluster's names, e.g. rdma/hca_shared_devices_a=1 (adds IPC_LOCK)
RAYJOB_IPC_LOCK ?=# rayjob: 1 adds IPC_LOCK without RAYJOB_RDMA, 0 never (empty: with RAYJOB_RDMA)
RAYJOB_NODE_SELECTOR ?=# rayjob: node labels every pod needs, e.g. nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3
RAYJOB_TOLERATIONS ?=# rayjob: taints every pod tolerates, key[=value]:Effect,..., e.g. nvidia.com/gpu:NoSchedule
RAYJOB_AFFINITY ?=# rayjob: spread = at most one pod of the job per node (other affinities: RAYJOB_OVERLAY)
RAYJOB_HEAD_RESOURCES ?=# rayjob: the head's CPU and memory, requests = limits, e.g. cpu=8,memory=32Gi
RAYJOB_WORKER_RESOURCES ?=# rayjob: each GPU worker's CPU and memory, e.g. cpu=96,memory=1600Gi
RAYJOB_PULL_SECRETS ?=# rayjob: imagePullSecrets of every pod, e.g. registry-cred
RAYJOB_SERVICE_ACCOUNT ?=# rayjob: the pods' serviceAccountName
RAYJOB_SECRET_ENV ?=# rayjob: variables from Kubernetes secrets, NAME=secret/key,..., e.g. WANDB_API_KEY=wandb/api-key
RAYJOB_OVERLAY ?=# rayjob: a YAML or JSON pod-template piece merged into every pod (head: / workers: for each)
RAYJOB_RETRIES ?=# rayjob: backoffLimit (empty: 2 when the profile saves checkpoints, each retry resumes; else 0)
SLURM_PARTITION ?=# sbatch: the partition (empty: the cluster's default)
SLURM_ACCOUNT ?=# sbatch: the account to charge
SLURM_TIME ?=# sbatch: the time limit, e.g. 2-00:00:00 (empty: the partition's)
SLURM_GPUS ?=# sbatch: GPUs per node to ask for (empty: the profile's GPUS_PER_NODE; 0: none, the nodes' own)
SLURM_CONTAINER ?=# sbatch: pyxis (srun --container-image) or apptainer, with SLURM_IMAGE (empty: none)
SLURM_IMAGE ?=# sbatch: the verl image: pyxis a registry reference or .sqsh, Apptainer a .sif
SLURM_JOIN_TIMEOUT ?= 300# sbatch: seconds every node has to join the Ray cluster
SLURM_RAY_PORT ?= 6379# sbatch: the Ray head's port on the allocation's first node

# PROFILE as the tools take it: a bundle profile's name, or with SITE the site profile's file.
PROFILE_ARG = $(if $(SITE),$(if $(PROFILE),$(abspath $(SITE))/$(PROFILE).env,$(error SITE=$(SITE) needs PROFILE=<name>, a profile in that folder)),$(PROFILE))
VERIFY := $(PYTHON) -I -B tools/verl/two-worker-grpo/verify-two-worker-grpo-v1.py
BUNDLE := $(PYTHON) prep/bundle.py
SUBMIT := $(PYTHON) prep/submit.py
# FORMAT=json: the findings alone on stdout, so make does not echo the recipe there either.
AS_FORMAT = --format="$(or $(FORMAT),text)"
QUIET_JSON = $(if $(filter json,$(FORMAT)),@)
JOB_VARS = --var SAVE_FREQ="$(SAVE_FREQ)" --var RESUME_FROM="$(RESUME_FROM)" $(foreach v,$(JOB_ENV),--var "$(v)")

##@ General
.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^##@/ {printf "\n%s\n", substr($$0, 5)} /^[A-Z0-9_]+ \?=/ {n = $$0; sub(/ .*/, "", n); v = $$0; sub(/^[^=]*= ?/, "", v); sub(/#.*/, "", v); c = $$0; sub(/^[^#]*# ?/, "", c); printf "  %-16s %s%s\n", n, c, (v == "" ? "" : " [" v "]")} /^[a-z0-9-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Prep box: before the job
.PHONY: new-profile prepare-inputs pin-inputs verify-inputs verify-scripts checksums install-tools driver-command runtime-env check-profile prune
new-profile: ## Write profiles/NAME.env (with SITE: SITE/NAME.env) from FROM, without input pins (then edit, prepare, pin)
	$(PYTHON) prep/new-profile.py --from="$(FROM)" --name="$(NAME)" --site="$(SITE)"
prepare-inputs: ## Put the profile's verl, model and data (GSM8K, or DATA_CONVERTER's) on PREP_ROOT
	$(PYTHON) prep/prepare-inputs.py prepare --prep-root="$(PREP_ROOT)" --profile="$(PROFILE_ARG)" --verl-mirror="$(VERL_MIRROR)" --model-source="$(MODEL_SOURCE)" --gsm8k-source="$(GSM8K_SOURCE)" --data-source="$(DATA_SOURCE)"
pin-inputs: ## Write PREP_ROOT's input hashes into PROFILE (no PROFILE: profiles/local.env), then make checksums
	$(PYTHON) prep/prepare-inputs.py pin --prep-root="$(PREP_ROOT)" --profile="$(PROFILE_ARG)" --name="$(NAME)" $(if $(FORCE),--force)
check-profile: ## Every rule on PROFILE that needs no cluster (batch sizes, rollout TP, lengths, EXTRA_OVERRIDES, pins)
	@$(VERIFY) check-profile --profile="$(PROFILE_ARG)" --storage-root="$(PREP_ROOT)" $(AS_FORMAT)
verify-inputs: ## Check verl, model and data on PREP_ROOT against the profile's pins
	$(QUIET_JSON)$(VERIFY) inputs --profile="$(PROFILE_ARG)" --storage-root="$(PREP_ROOT)" $(AS_FORMAT)
verify-scripts: ## Compile every script (py_compile, bash -n) and check every hash; make test lints
	$(BUNDLE) verify-scripts
checksums: ## Regenerate runtime-env.json, checksums/SHA256SUMS and the launcher's pin
	$(BUNDLE) checksums
install-tools: ## Copy the bundle to its own version folder under PREP_ROOT/tools/verl/two-worker-grpo/, verify it there; SITE's profiles beside it
	$(BUNDLE) install --prep-root="$(PREP_ROOT)" --site="$(SITE)" $(if $(FORCE),--force)
prune: ## Remove installed bundle versions older than the KEEP newest, except those a run names or uses; say why each stays
	$(PYTHON) prep/prune.py --prep-root="$(PREP_ROOT)" --keep="$(KEEP)"
driver-command: ## Print the Driver command to paste into the job form (the same for every run)
	@$(BUNDLE) driver-command "$(STORAGE_ROOT)" --profile="$(PROFILE_ARG)" --ignored-run-id="$(RUN_ID)"
runtime-env: ## Print the RuntimeEnv JSON to paste into the job form
	@$(VERIFY) runtime-env --profile="$(PROFILE_ARG)" --storage-root="$(STORAGE_ROOT)" --bundle-version="$$($(BUNDLE) version)"

##@ Submit: from the prep box to a Ray cluster's job server, as a KubeRay RayJob, or as a Slurm batch job
.PHONY: submit stop logs rayjob sbatch
submit: ## Submit the run RUN_ID to RAY_ADDRESS's job server, follow it, exit with its verdict
	@$(SUBMIT) submit --address="$(RAY_ADDRESS)" --run-id="$(RUN_ID)" --profile="$(PROFILE_ARG)" --storage-root="$(STORAGE_ROOT)" --prep-root="$(PREP_ROOT)" --bundle="$(SUBMIT_BUNDLE)" $(JOB_VARS)
stop: ## Stop the submitted run RUN_ID (it leaves FAILED with signal=TERM)
	@$(SUBMIT) stop --address="$(RAY_ADDRESS)" --run-id="$(RUN_ID)"
logs: ## Print the submitted run RUN_ID's log and status; FOLLOW=1 follows it: phase, step k of N, s/step, ETA, heartbeat, verdict
	@$(SUBMIT) logs --address="$(RAY_ADDRESS)" --run-id="$(RUN_ID)" --prep-root="$(PREP_ROOT)" $(if $(FOLLOW),--follow)
rayjob: ## Print a KubeRay RayJob (ray.io/v1) that runs RUN_ID: kubectl apply -f -
	@$(PYTHON) prep/rayjob.py --run-id="$(RUN_ID)" --profile="$(PROFILE_ARG)" --storage-root="$(STORAGE_ROOT)" --image="$(RAYJOB_IMAGE)" --claim="$(RAYJOB_CLAIM)" --head-gpus="$(RAYJOB_HEAD_GPUS)" --bundle="$(SUBMIT_BUNDLE)" --rdma="$(RAYJOB_RDMA)" --ipc-lock="$(RAYJOB_IPC_LOCK)" --node-selector="$(RAYJOB_NODE_SELECTOR)" --tolerations="$(RAYJOB_TOLERATIONS)" --affinity="$(RAYJOB_AFFINITY)" --head-resources="$(RAYJOB_HEAD_RESOURCES)" --worker-resources="$(RAYJOB_WORKER_RESOURCES)" --pull-secrets="$(RAYJOB_PULL_SECRETS)" --service-account="$(RAYJOB_SERVICE_ACCOUNT)" --secret-env="$(RAYJOB_SECRET_ENV)" --overlay="$(RAYJOB_OVERLAY)" --retries="$(RAYJOB_RETRIES)" $(JOB_VARS)

sbatch: ## Print a Slurm batch script that runs RUN_ID on an allocation: make sbatch ... > job.sh && sbatch job.sh
	@$(PYTHON) prep/sbatch.py --run-id="$(RUN_ID)" --profile="$(PROFILE_ARG)" --storage-root="$(STORAGE_ROOT)" --bundle="$(SUBMIT_BUNDLE)" --partition="$(SLURM_PARTITION)" --account="$(SLURM_ACCOUNT)" --time="$(SLURM_TIME)" --gpus="$(SLURM_GPUS)" --container="$(SLURM_CONTAINER)" --image="$(SLURM_IMAGE)" --join-timeout="$(SLURM_JOIN_TIMEOUT)" --ray-port="$(SLURM_RAY_PORT)" $(JOB_VARS)

##@ Afterwards: on the prep box
.PHONY: postflight audit report runs compare
postflight: ## Re-verify run RUN_ID from its files under PREP_ROOT
	$(QUIET_JSON)$(VERIFY) postflight --storage-root="$(PREP_ROOT)" --run-id="$(RUN_ID)" $(AS_FORMAT)
audit: ## Re-check RUN_ID read-only: the same checks, nothing written (exit 3: checkpoint not here)
	$(QUIET_JSON)$(VERIFY) postflight --audit --storage-root="$(PREP_ROOT)" --run-id="$(RUN_ID)" $(AS_FORMAT)
report: ## Write RUN_ID's report.html (verdict, topology, charts) and print its summary
	@$(VERIFY) report --storage-root="$(PREP_ROOT)" --run-id="$(RUN_ID)" $(if $(REPORT_HTML),--html="$(REPORT_HTML)") $(if $(REPORT_REFERENCE),--reference="$(REPORT_REFERENCE)")
runs: ## List every run under PREP_ROOT: RUN_ID, start, duration, profile, verdict (FORMAT=json for scripts)
	@$(VERIFY) runs --storage-root="$(PREP_ROOT)" $(AS_FORMAT)
compare: ## Compare RUN_ID with the AGAINST run(s): what ran, how it went, what it learned; a page and a summary
	@$(VERIFY) compare --storage-root="$(PREP_ROOT)" --run-id="$(RUN_ID)" --against="$(AGAINST)" --tolerance="$(TOLERANCE)" --html="$(COMPARE_HTML)" $(AS_FORMAT)

##@ Development
.PHONY: demo smoke smoke-2x1 wheelhouse smoke-lock gpu-checks findings-doc test test-fast bench
demo: ## A first look without a GPU: all three moments on a scratch volume, in under a minute
	dev/demo.sh "$(DEMO_ROOT)"
smoke: ## The main job for real on this machine's one GPU: its Python environment, inputs, Ray, GRPO, SUCCESS
	SMOKE_PYTHON="$(PYTHON)" SMOKE_ENV="$(SMOKE_ENV)" WHEELHOUSE="$(WHEELHOUSE)" dev/smoke.sh "$(SMOKE_ROOT)"
smoke-2x1: ## The same on two Ray hosts (network namespaces, needs root) sharing GPU 0, NCCL over Socket
	SMOKE_ENV="$(SMOKE_ENV)" WHEELHOUSE="$(WHEELHOUSE)" $(PYTHON) dev/multihost-smoke.py "$(SMOKE_ROOT)/2x1"
wheelhouse: ## Download the smoke environment's locked wheels into WHEELHOUSE (for a GPU machine without network)
	$(PYTHON) dev/smoke-env.py wheelhouse --dest="$(WHEELHOUSE)" --python-version="$(WHEELHOUSE_PYTHON)"
smoke-lock: ## Rewrite dev/smokeenv/lock.txt's hashes from dev/smokeenv/pins.txt (needs the package index)
	$(PYTHON) dev/smoke-lock.py
gpu-checks: ## Every GPU's health and the node's own NCCL collective, for real on this GPU machine (no Ray needed)
	$(PYTHON) dev/gpu-checks-real.py
findings-doc: ## Regenerate docs/findings.md from the finding catalog
	$(VERIFY) catalog --page > docs/findings.md
test: ## Install what tests need (venv, bats, shellcheck), run them all
	tests/run.sh
test-fast: ## The inner loop: the Python tests without a Ray cluster, a browser or Slurm, under a minute
	tests/run.sh --fast
bench: ## Run the benchmarks in bench/ and print their ratios
	bench/run.sh

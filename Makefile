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
PROFILE ?=# a profile in tools/verl/two-worker-grpo/profiles/ (empty: tutorial-2x2-a100)
RUN_ID ?=# the run to check afterwards, e.g. make postflight RUN_ID=exp-001
REPORT_HTML ?=# make report: write the page here instead of report.html in the run folder
FORCE ?=# FORCE=1 lets pin-inputs replace files that differ (installed bundle versions are never replaced)
FROM ?=# make new-profile: the profile to start from (empty: tutorial-2x2-a100)
NAME ?=# make new-profile: the new profile's name; make pin-inputs: write into this profile instead
VERL_MIRROR ?=# prepare-inputs: clone verl from this URL or local path (default: the profile's)
MODEL_SOURCE ?=# prepare-inputs: copy the model from this folder (default: ModelScope)
GSM8K_SOURCE ?=# prepare-inputs: convert GSM8K from this folder (default: Hugging Face)
SMOKE_ROOT ?= $(CURDIR)/.smoke# make smoke's self-contained storage root
DEMO_ROOT ?= $(CURDIR)/.demo# make demo's scratch volume (made afresh on every run)
PYTHON ?= python3# the Python that runs the tools (3.8 or newer, standard library only)
RAY_ADDRESS ?=# submit, stop, logs: the head's job server, e.g. http://10.0.0.5:8265
SAVE_FREQ ?=# submit: a checkpoint every N steps (empty: the profile's)
RESUME_FROM ?=# submit: continue this preempted run's RUN_ID under the new RUN_ID
JOB_ENV ?=# submit, rayjob: more job variables, e.g. JOB_ENV="KILL_GRACE=30 PROBE_TIMEOUT=300"
SUBMIT_BUNDLE ?=# submit, rayjob: the bundle whose launcher and profiles to use (empty: this checkout's)
RAYJOB_IMAGE ?= cr.infini-ai.com/infini-ai/verl:app-verl0.6-transformers4.56.1-sglang0.5.2-mcore0.13.0-te2.2# rayjob: the verl image of every pod
RAYJOB_CLAIM ?= verl-reproduction# rayjob: the PersistentVolumeClaim of the shared volume
RAYJOB_HEAD_GPUS ?=# rayjob: GPUs of the head pod (empty: the profile's GPUS_PER_NODE; 0: CPU-only head)

VERIFY := $(PYTHON) -I -B tools/verl/two-worker-grpo/verify-two-worker-grpo-v1.py
BUNDLE := $(PYTHON) prep/bundle.py
SUBMIT := $(PYTHON) prep/submit.py
JOB_VARS = --var SAVE_FREQ="$(SAVE_FREQ)" --var RESUME_FROM="$(RESUME_FROM)" $(foreach v,$(JOB_ENV),--var "$(v)")

##@ General
.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^##@/ {printf "\n%s\n", substr($$0, 5)} /^[A-Z0-9_]+ \?=/ {n = $$0; sub(/ .*/, "", n); v = $$0; sub(/^[^=]*= ?/, "", v); sub(/#.*/, "", v); c = $$0; sub(/^[^#]*# ?/, "", c); printf "  %-16s %s%s\n", n, c, (v == "" ? "" : " [" v "]")} /^[a-z0-9-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Prep box: before the job
.PHONY: new-profile prepare-inputs pin-inputs verify-inputs verify-scripts checksums install-tools driver-command runtime-env check-profile
new-profile: ## Write profiles/NAME.env from FROM, without input pins (then edit, prepare, pin)
	$(PYTHON) prep/new-profile.py --from="$(FROM)" --name="$(NAME)"
prepare-inputs: ## Put the profile's verl, model and GSM8K on PREP_ROOT (from the network or local copies)
	$(PYTHON) prep/prepare-inputs.py prepare --prep-root="$(PREP_ROOT)" --profile="$(PROFILE)" --verl-mirror="$(VERL_MIRROR)" --model-source="$(MODEL_SOURCE)" --gsm8k-source="$(GSM8K_SOURCE)"
pin-inputs: ## Write PREP_ROOT's input hashes into PROFILE (no PROFILE: profiles/local.env), then make checksums
	$(PYTHON) prep/prepare-inputs.py pin --prep-root="$(PREP_ROOT)" --profile="$(PROFILE)" --name="$(NAME)" $(if $(FORCE),--force)
check-profile: ## Every rule on PROFILE that needs no cluster (batch sizes, rollout TP, lengths, EXTRA_OVERRIDES, pins)
	@$(VERIFY) check-profile --profile="$(PROFILE)"
verify-inputs: ## Check verl, model and data on PREP_ROOT against the profile's pins
	$(VERIFY) inputs --profile="$(PROFILE)" --storage-root="$(PREP_ROOT)"
verify-scripts: ## Compile every script (py_compile, bash -n) and check every hash; make test lints
	$(BUNDLE) verify-scripts
checksums: ## Regenerate runtime-env.json, checksums/SHA256SUMS and the launcher's pin
	$(BUNDLE) checksums
install-tools: ## Copy the bundle to its own version folder under PREP_ROOT/tools/verl/two-worker-grpo/, verify it there
	$(BUNDLE) install --prep-root="$(PREP_ROOT)" $(if $(FORCE),--force)
driver-command: ## Print the Driver command to paste into the job form (the same for every run)
	@$(BUNDLE) driver-command "$(STORAGE_ROOT)" --profile="$(PROFILE)" --ignored-run-id="$(RUN_ID)"
runtime-env: ## Print the RuntimeEnv JSON to paste into the job form
	@$(VERIFY) runtime-env --profile="$(PROFILE)" --storage-root="$(STORAGE_ROOT)" --bundle-version="$$($(BUNDLE) version)"

##@ Submit: from the prep box to a Ray cluster's job server, or as a KubeRay RayJob
.PHONY: submit stop logs rayjob
submit: ## Submit the run RUN_ID to RAY_ADDRESS's job server, follow it, exit with its verdict
	@$(SUBMIT) submit --address="$(RAY_ADDRESS)" --run-id="$(RUN_ID)" --profile="$(PROFILE)" --storage-root="$(STORAGE_ROOT)" --prep-root="$(PREP_ROOT)" --bundle="$(SUBMIT_BUNDLE)" $(JOB_VARS)
stop: ## Stop the submitted run RUN_ID (it leaves FAILED with signal=TERM)
	@$(SUBMIT) stop --address="$(RAY_ADDRESS)" --run-id="$(RUN_ID)"
logs: ## Print the submitted run RUN_ID's log so far and its status
	@$(SUBMIT) logs --address="$(RAY_ADDRESS)" --run-id="$(RUN_ID)"
rayjob: ## Print a KubeRay RayJob (ray.io/v1) that runs RUN_ID: kubectl apply -f -
	@$(PYTHON) prep/rayjob.py --run-id="$(RUN_ID)" --profile="$(PROFILE)" --storage-root="$(STORAGE_ROOT)" --image="$(RAYJOB_IMAGE)" --claim="$(RAYJOB_CLAIM)" --head-gpus="$(RAYJOB_HEAD_GPUS)" --bundle="$(SUBMIT_BUNDLE)" $(JOB_VARS)

##@ Afterwards: on the prep box
.PHONY: postflight audit report runs
postflight: ## Re-verify run RUN_ID from its files under PREP_ROOT
	$(VERIFY) postflight --storage-root="$(PREP_ROOT)" --run-id="$(RUN_ID)"
audit: ## Re-check RUN_ID read-only: the same checks, nothing written (exit 3: checkpoint not here)
	$(VERIFY) postflight --audit --storage-root="$(PREP_ROOT)" --run-id="$(RUN_ID)"
report: ## Write RUN_ID's report.html (verdict, topology, charts) and print its summary
	@$(VERIFY) report --storage-root="$(PREP_ROOT)" --run-id="$(RUN_ID)" $(if $(REPORT_HTML),--html="$(REPORT_HTML)")
runs: ## List every run under PREP_ROOT: RUN_ID, start, duration, profile, verdict
	@$(VERIFY) runs --storage-root="$(PREP_ROOT)"

##@ Development
.PHONY: demo smoke smoke-2x1 findings-doc test bench
demo: ## A first look without a GPU: all three moments on a scratch volume, in under a minute
	dev/demo.sh "$(DEMO_ROOT)"
smoke: ## The main job for real on this machine's one GPU: inputs, Ray, GRPO, SUCCESS
	dev/smoke.sh "$(SMOKE_ROOT)"
smoke-2x1: ## The same on two Ray hosts (network namespaces, needs root) sharing GPU 0, NCCL over Socket
	$(PYTHON) dev/multihost-smoke.py "$(SMOKE_ROOT)/2x1"
findings-doc: ## Regenerate docs/findings.md from the finding catalog
	$(VERIFY) catalog --page > docs/findings.md
test: ## Install what tests need (venv, bats, shellcheck), run them all
	tests/run.sh
bench: ## Run the benchmarks in bench/ and print their ratios
	bench/run.sh

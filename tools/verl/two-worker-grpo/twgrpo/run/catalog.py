"""Every finding id with its title and the fix to try; README's troubleshooting table is this.

A test checks that README.md lists every id here, so the table cannot drift from the code.
"""
CATALOG = {
    # The launcher, before it claims a run folder (exit 2) or when a bundle file differs (exit 1)
    "LAUNCH-E000": ("unknown launcher argument", "Run the launcher with no arguments (the job's environment carries its settings), or --help, or --verify-bundle."),
    "LAUNCH-E001": ("a required command is missing", "Run in the verl image: python3, git, sha256sum and coreutils must be on PATH."),
    "LAUNCH-E002": ("STORAGE_ROOT is not set", "Keep `export STORAGE_ROOT=...` in the Driver command (make driver-command prints it)."),
    "LAUNCH-E003": ("RUN_ID is not set", "Add RUN_ID=<new name> to the job's environment variables."),
    "LAUNCH-E004": ("RUN_ID has characters outside [A-Za-z0-9._-]", "Use letters, digits, '.', '_' and '-', starting with a letter or digit."),
    "LAUNCH-E005": ("STORAGE_ROOT is not a directory", "Mount the shared volume at that path in the job form (same path on every Worker)."),
    "LAUNCH-E006": ("STORAGE_ROOT is not writable", "Give the mount read-write access in the job form."),
    "LAUNCH-E007": ("an input folder is missing", "Prepare and check the inputs on the prep box: make prepare-inputs verify-inputs."),
    "LAUNCH-E008": ("the run folder exists", "Set a new RUN_ID for every run, clone or retry; a run folder is never reused."),
    "LAUNCH-E009": ("the profile cannot be used", "Set PROFILE to a profile name in the installed bundle's profiles/ (see the message for the problem)."),
    "LAUNCH-E010": ("the bundle's SHA256SUMS is missing", "Install the bundle: make install-tools STORAGE_ROOT=<prep box mount>."),
    "LAUNCH-E011": ("SHA256SUMS differs from the launcher's pin", "The installed bundle is not the one this launcher was pinned to: reinstall it (make install-tools FORCE=1)."),
    "LAUNCH-E012": ("a bundle file differs from SHA256SUMS", "Someone changed an installed file: reinstall (make install-tools FORCE=1); to change it on purpose, edit the repo and run make checksums."),
    "LAUNCH-E030": ("SAVE_FREQ is not a positive whole number", "Set SAVE_FREQ=<N> to save a checkpoint every N steps (verl also saves the last step), or leave it unset for the profile's."),
    "LAUNCH-E031": ("RESUME_FROM is not another run's RUN_ID", "Set RESUME_FROM to the RUN_ID of the preempted run (letters, digits, '.', '_', '-'), never to this run's own RUN_ID."),
    "LAUNCH-E013": ("postflight passed but wrote no SUCCESS", "This is a bug; verification.json holds the verdict."),
    "LAUNCH-E014": ("the installed bundle holds files SHA256SUMS does not list", "The bundle must be exactly SHA256SUMS (a dropped-in profile or module could replace pins or shadow code): move the listed paths out, or install into a new folder (make install-tools)."),
    "LAUNCH-E015": ("RUN_ID is too long", "Use at most 128 characters; the run folder's name must fit every file system."),
    "LAUNCH-E016": ("KILL_GRACE is not a whole number of seconds", "Unset KILL_GRACE (default 10 s) or set it to 1..9999."),
    "LAUNCH-E017": ("runs/ is not writable", "Mount the volume read-write, runs/ included; check the folder's owner and mode."),
    "LAUNCH-E018": ("the run folder cannot be created", "The message names the cause (no space left, name too long, permissions): fix it and start again with a new RUN_ID."),
    "LAUNCH-E019": ("the launcher cannot write FAILED or resolved-command.txt", "The disk is full or read-only (the message names the cause); nothing half-written is left. Free space and re-run with a new RUN_ID, or judge a finished run again with make postflight RUN_ID=..."),
    "LAUNCH-E020": ("the launcher died and its watchdog stopped the phase", "Something killed the launcher (often the platform after its grace period): see FAILED's cause; re-run with a new RUN_ID."),
    "LAUNCH-E021": ("a phase ignored TERM and was killed", "The phase's whole process group got KILL after KILL_GRACE seconds; its last records may be missing. Re-run with a new RUN_ID."),
    # Resume (RESUME_FROM=<earlier RUN_ID>: the launcher's resume phase, before any GPU time)
    "RES-E001": ("the run to resume from does not exist", "Set RESUME_FROM to the RUN_ID of a run folder under runs/verl/two-worker-grpo/ on this volume (a real folder, not a link)."),
    "RES-E002": ("the earlier run's run.json is missing or unreadable", "That folder was not left by this bundle's launcher, or its record is damaged: resume from another run, or start afresh."),
    "RES-E003": ("the earlier run used another profile", "Resume with the earlier run's PROFILE (its run.json names it); only SAVE_FREQ may differ."),
    "RES-E004": ("the earlier run used other input pins", "The verl commit, model or data pins differ: the checkpoint belongs to other inputs; start afresh with a new RUN_ID and no RESUME_FROM."),
    "RES-E005": ("the earlier run used another bundle", "Resume with the bundle the earlier run used (its run.json holds the hashes), or start afresh."),
    "RES-E006": ("the earlier run succeeded", "A SUCCESS is never resumed: its checkpoint is final. Start a new run if you want more steps."),
    "RES-E007": ("the earlier run is still running", "Wait until it ends (or stop it: it then leaves FAILED), then resume."),
    "RES-E008": ("the earlier run has no FAILED marker", "It was killed hard or still runs on another host: check that no job of it is alive, then write its FAILED marker (phase=unknown) by hand and resume."),
    "RES-E009": ("the earlier run has no complete checkpoint", "It stopped before its first checkpoint finished (or the files are damaged): start afresh, with SAVE_FREQ=<N> for checkpoints every N steps."),
    "RES-E010": ("the earlier run's checkpoint is at the target step", "Nothing is left to train: check the earlier run with make postflight RUN_ID=<it>."),
    "RES-E011": ("the earlier run's checkpoint folder leads outside its run folder", "A symbolic link points elsewhere: resume only from a run folder that holds its own checkpoints."),
    # General
    "GEN-E001": ("a check crashed", "This is a bug in the verifier; report it with the traceback in the JSON record."),
    "GEN-E002": ("a record or marker could not be written", "The message names the file and the cause (no space left, read-only file system): free space or remount read-write, then run the phase again (make postflight RUN_ID=...). Nothing half-written is left behind."),
    "GEN-E003": ("the disk refused an operation", "The message names the path and the cause; check the volume's space, permissions and mount."),
    "GEN-E004": ("a record's path is a symlink", "Records are written only as plain files: remove the symlink (it may point into another run) and run the phase again."),
    # Inputs (prep box and launcher)
    "INP-E001": ("storage is an overlay mount", "Mount the shared volume itself; an overlay is the container's private disk, not shared storage."),
    "INP-E002": ("storage is not writable", "Mount the shared volume read-write (job form: access permission read-write)."),
    "INP-E003": ("verl checkout missing or not a git work tree", "Run `make prepare-inputs` (or clone verl at the pinned commit into code/verl/<commit>/)."),
    "INP-E004": ("verl checkout at the wrong commit", "Check out the profile's VERL_COMMIT: git -C <checkout> checkout <commit>."),
    "INP-E005": ("verl checkout has local changes", "Commit nothing there: `git -C <checkout> status` shows what to revert (git stash or git checkout -- .)."),
    "INP-E006": ("SHA256SUMS missing", "Prepare the folder with `make prepare-inputs`, which writes SHA256SUMS."),
    "INP-E007": ("SHA256SUMS differs from the profile's pin", "The folder is not the pinned snapshot: re-download it, or pin it on purpose with `make pin-inputs` and `make checksums`."),
    "INP-E008": ("a file does not match SHA256SUMS", "The file changed or is truncated: re-download that file (prepare-inputs redoes it)."),
    "INP-E009": ("a file listed in SHA256SUMS is missing or unreadable", "Restore the file from the source; check the volume's permissions."),
    "INP-E010": ("dataset-manifest.json missing or invalid", "Re-run the GSM8K conversion (`make prepare-inputs`), which writes the manifest."),
    "INP-E011": ("dataset revision differs from the profile", "Convert the pinned revision, or use the profile whose DATASET_REVISION matches."),
    "INP-E012": ("parquet file unreadable or malformed", "Re-run the conversion; a torn copy has no valid footer."),
    "INP-E013": ("parquet row count differs from the profile", "Convert the full split of the pinned revision (train 7473 / test 1319 for GSM8K main)."),
    "INP-E014": ("model weights unreadable", "Re-download the weights; a safetensors file must hold its header and every tensor's bytes."),
    "INP-E015": ("SHA256SUMS has a malformed line", "Regenerate it: (cd <folder> && sha256sum <files> > SHA256SUMS)."),
    "INP-E016": ("parquet lacks verl's columns", "Convert with the bundle's converter (prepare-inputs): verl reads data_source, prompt, ability, reward_model, extra_info."),
    "INP-E020": ("a SHA256SUMS entry leaves its folder", "Entries name files inside the folder only: no absolute paths, no '..'. Regenerate it: make prepare-inputs (or cd <folder> && sha256sum <files>)."),
    "INP-E021": ("a SHA256SUMS entry is listed twice", "Each file once: regenerate SHA256SUMS (make prepare-inputs), then make pin-inputs and make checksums."),
    "INP-E022": ("a SHA256SUMS entry is a symlink leading out of the folder", "Copy the real file into the folder instead of linking to it, then regenerate and re-pin SHA256SUMS."),
    "INP-E023": ("a SHA256SUMS entry is not a regular file", "Only regular files are hashed (not devices, FIFOs or folders): remove the entry and regenerate SHA256SUMS."),
    "INP-E024": ("SHA256SUMS cannot be read", "It must be a regular UTF-8 file of at most 16 MiB: regenerate it with make prepare-inputs."),
    "INP-E025": ("SHA256SUMS does not list a file the profile needs", "An empty or partial SHA256SUMS proves nothing: regenerate it over every file (make prepare-inputs), then make pin-inputs and make checksums."),
    "INP-W001": ("a file is not covered by SHA256SUMS", "Remove stray files from the pinned folder, or regenerate and re-pin SHA256SUMS."),
    # Preflight (on the cluster, before any GPU time)
    "PRE-E001": ("train batch x rollout.n does not divide by the world size", "Change TRAIN_BATCH_SIZE or ROLLOUT_N in the profile so TRAIN_BATCH_SIZE x ROLLOUT_N divides by NODES x GPUS_PER_NODE."),
    "PRE-E002": ("train batch smaller than the PPO mini batch", "Set PPO_MINI_BATCH_SIZE <= TRAIN_BATCH_SIZE in the profile."),
    "PRE-E003": ("PPO mini batch per GPU is 0 or does not divide by the micro batch", "Pick PPO_MINI_BATCH_SIZE x ROLLOUT_N / world size as a positive multiple of PPO_MICRO_BATCH_SIZE_PER_GPU."),
    "PRE-E004": ("rollout tensor parallel size does not divide the world size", "Set ROLLOUT_TP to a divisor of NODES x GPUS_PER_NODE."),
    "PRE-E005": ("the train split is too small for the target steps", "Lower TARGET_STEPS or TRAIN_BATCH_SIZE, or use the full train split."),
    "PRE-E010": ("ray is not importable", "Run the Driver in the verl image, which has ray; do not install packages at run time."),
    "PRE-E011": ("cannot connect to the Ray cluster", "Pick the Ray distributed framework in the job form; do not set RAY_ADDRESS, head address or port yourself."),
    "PRE-E012": ("wrong number of live Ray nodes", "Set the job's Worker count to the profile's NODES and re-run with a new RUN_ID; never lower the expectation."),
    "PRE-E013": ("wrong number of GPUs in Ray", "Pick a Worker spec with GPUS_PER_NODE GPUs each; re-run with a new RUN_ID."),
    "PRE-E014": ("a Ray node id is malformed", "The cluster reported a nil or malformed node id; restart the job (the cluster is unhealthy)."),
    "PRE-E015": ("no probe result from a node", "The node hung or died during the probe: check that node's health and logs, then re-run with a new RUN_ID."),
    "PRE-E016": ("a probe ran on another node than it was pinned to", "Node affinity was not honoured; check the Ray version and cluster health."),
    "PRE-E017": ("a node cannot read the shared-storage sentinel", "Mount the same shared volume at the same path on every Worker."),
    "PRE-E018": ("the driver cannot read a node's marker", "Mount the same shared volume read-write at the same path on every Worker."),
    "PRE-E019": ("nvidia-smi failed or printed something unparsable", "Check the node's NVIDIA driver (nvidia-smi must run in the image)."),
    "PRE-E020": ("wrong number of GPUs on a node", "Pick a Worker spec with GPUS_PER_NODE GPUs; CUDA_VISIBLE_DEVICES must not hide any."),
    "PRE-E021": ("wrong GPU model on a node", "Pick the Worker spec with the profile's GPU_MODEL, or use a profile for the GPUs you have."),
    "PRE-E022": ("NVIDIA driver older than the profile allows", "Use nodes whose driver is at least MIN_DRIVER (CUDA 12 needs 525.60.13)."),
    "PRE-E023": ("a node's storage is overlay or read-only", "Mount the shared volume read-write on every Worker, at the same path."),
    "PRE-E024": ("NCCL_IB_DISABLE is not 1 on a node", "Paste the bundle's RuntimeEnv (make runtime-env): it sets NCCL_IB_DISABLE=1 for every node."),
    "PRE-E025": ("the rollout engine is not importable on a node", "Use the verl image with SGLang; for ROLLOUT_ENGINE=hf put the bundle's rollout/ folder on PYTHONPATH."),
    "PRE-E026": ("package versions differ across nodes", "Run every Worker on the same image; nothing may be installed at run time."),
    "PRE-E027": ("Python differs across nodes", "Run every Worker on the same image."),
    "PRE-W001": ("a package has the same version but another location on a node", "Usually harmless (a different install path); run every Worker on the same image to be sure."),
    "PRE-E028": ("nodes see different inputs", "Every Worker must mount the same volume: check the mount source on each node."),
    # Postflight (from the run folder alone)
    "POST-E001": ("training.log is missing", "The launcher tees the training output to training.log: check that the run got to its training phase (FAILED says where it stopped)."),
    "POST-E002": ("a fatal marker is in the training log", "Read training.log at the line shown; fix the first error (OOM, NCCL, a dead actor), then re-run with a new RUN_ID."),
    "POST-E003": ("verl's config validation line is missing", "verl never validated its config: the run stopped early; see training.log."),
    "POST-E004": ("'Total training steps' differs from the profile", "The run trained a different number of steps: check trainer.total_training_steps and the train split's size."),
    "POST-E005": ("no global_step_N in the log", "The run did not reach its last step or did not save it; see training.log."),
    "POST-E006": ("the resolved command lacks a topology or runtime override", "Run the bundle's launcher unchanged; resolved-command.txt must hold the profile's overrides."),
    "POST-E007": ("preflight.json is missing or did not pass", "Postflight maps ranks to the nodes preflight saw: run the whole launcher, not the training alone."),
    "POST-E008": ("no complete NCCL communicator of the world size", "A rank never finished NCCL init: look for the rank's errors in training.log (network, GPU, a dead worker)."),
    "POST-E009": ("a rank was claimed by more than one process", "Two workers share a rank: the log mixes runs, or the cluster ran duplicate workers; re-run with a new RUN_ID."),
    "POST-E010": ("a rank ran on a host preflight did not see", "The cluster changed between preflight and training (a node replaced?); re-run with a new RUN_ID."),
    "POST-E011": ("ranks per node differ from the profile", "Ray placed the workers unevenly: every node must offer exactly GPUS_PER_NODE GPUs and nothing else may hold GPUs."),
    "POST-E012": ("a rank lacks its Gloo full-mesh line", "Keep GLOO_LOG_LEVEL=INFO in the RuntimeEnv (torch >= 2.5 logs the mesh only then); check the rank's network."),
    "POST-E013": ("a rank's NCCL transport is not Socket with IB disabled", "Keep RDMA off and NCCL_IB_DISABLE=1 in the RuntimeEnv for every node (make runtime-env)."),
    "POST-E014": ("no TensorBoard event file", "TENSORBOARD_DIR must reach the TaskRunner: keep the launcher's ray_kwargs override and trainer.logger with tensorboard."),
    "POST-E015": ("a TensorBoard record is damaged", "The event file was corrupted on storage; the metrics in that record are lost."),
    "POST-E016": ("a required TensorBoard scalar is missing", "verl logs these scalars every step: the run did not train; see training.log."),
    "POST-E017": ("a required scalar is not finite at the target step", "NaN or inf metrics mean a broken run (for tiny models: use eager attention); fix it, never loosen the check."),
    "POST-E018": ("a rollout file is missing", "trainer.rollout_data_dir must point into the run folder; the run may have stopped before that step."),
    "POST-E019": ("a rollout file has the wrong number of rows", "Each step dumps train_batch_size x rollout.n rows; a short file means a cut-off run or a torn write."),
    "POST-E020": ("a rollout row is malformed", "Rows need input, output, a finite score and their step; see the row shown."),
    "POST-E021": ("a checkpoint shard is missing", "Every rank saves model, optim and extra_state: a missing one means a rank failed during save."),
    "POST-E022": ("a checkpoint shard is damaged", "The shard is truncated or corrupt on storage (zip CRC); re-run: the checkpoint cannot be trusted."),
    "POST-E023": ("fsdp_config.json is not FSDP2 at the world size", "The checkpoint was written by another strategy or world size than the profile's."),
    "POST-E024": ("data.pt or the Hugging Face config is missing or damaged", "The checkpoint is incomplete; re-run with a new RUN_ID."),
    "POST-E025": ("the checkpoint tracker names another step", "latest_checkpointed_iteration.txt must hold the target step; the run did not save its last step."),
    "POST-E026": ("world-size communicators disagree on rank placement", "Two complete communicators map ranks to different processes: the log mixes runs; re-run with a new RUN_ID."),
    "POST-E030": ("a training.log line is longer than the reader's limit (1 MiB)", "No log line is that long: find it at the byte offset shown (a binary dump, a runaway print, a damaged file); it was not read, so re-run if it may hide an error."),
    "POST-E031": ("a rollout row is longer than the reader's limit (4 MiB)", "A rollout row is one prompt and one response: a longer row is a runaway generation or damage; see the offset shown."),
    "POST-E032": ("a checkpoint shard is not laid out as torch.save writes it", "A shard must be torch.save's archive (one folder, data.pkl, byteorder, version, the storages data.pkl references, stored, not overlapping): the file was replaced or forged; re-run."),
    "POST-E033": ("training.log repeats evidence lines beyond the reader's limit", "More than 100,000 NCCL init, transport, Gloo or step values: the log mixes many runs or was tampered with; use the run's own training.log."),
    "POST-E040": ("the run folder is a symlink", "Postflight writes only into the run's own folder: name the real folder (it may point at another run)."),
    "POST-E041": ("inputs.json is missing or did not pass", "SUCCESS needs every phase: run the whole launcher; its inputs phase writes inputs.json."),
    "POST-E060": ("a resumed run's lineage in run.json is malformed", "run.json's resume record names the earlier run and step; it was damaged: the run cannot be verified."),
    "POST-E061": ("the log does not show verl loading the recorded checkpoint", "The training did not start from the lineage's checkpoint: see training.log for 'Load from checkpoint folder'; resume again with a new RUN_ID."),
    "POST-E062": ("the log's training steps do not continue from the checkpoint", "A resumed run trains steps N+1..target only: see the step:N lines in training.log."),
    "POST-E063": ("TensorBoard steps do not continue from the checkpoint", "training/global_step must be logged for steps N+1..target only: TENSORBOARD_DIR must be this run's own."),
    "POST-E064": ("the resolved command lacks the resume overrides", "Run the bundle's launcher with RESUME_FROM unchanged: it adds trainer.resume_mode=resume_path and the checkpoint path."),
    "POST-E065": ("the earlier run's checkpoint differs from the hashes recorded at resume", "The checkpoint the run started from was changed or removed afterwards: the lineage cannot be proved."),
    "POST-E090": ("preflight.json cannot map ranks to nodes: not an object, or its workers have fields of the wrong type", "preflight.json comes only from the run's preflight phase: the record was damaged or written by something else; the run cannot be verified from it."),
    "POST-W001": ("a TensorBoard file ends in a cut-off record", "Usually the writer was stopped mid-write; earlier records are intact and were used."),
    # The report (make report): what could not be read, so the page shows a gap, not a guess
    "RPT-E001": ("run.json is missing or unreadable", "The launcher writes run.json first: check RUN_ID and PREP_ROOT; for a run started another way, set PROFILE= to the profile it used."),
    "RPT-E002": ("a JSON record is unreadable", "Re-run make postflight RUN_ID=... to rewrite verification.json and actor-placement.json; inputs.json and preflight.json come only from the run itself."),
    "RPT-E003": ("driver.log is missing or holds no phase line", "The launcher tees driver.log from its first line: the run was not started by the launcher, or its log was removed."),
    "RPT-E004": ("SUCCESS or FAILED disagrees with the latest records", "The latest verification wins: read verification.json, fix what it names, and re-run make postflight RUN_ID=..."),
    "RPT-E005": ("TensorBoard scalars cannot be charted", "See postflight's POST-E014..E017 for the event files; charts need readable events.out.tfevents.* under tensorboard/."),
    "RPT-E006": ("no rollout samples can be shown", "See postflight's POST-E018..E020; samples come from rollouts/<step>.jsonl."),
    "RPT-E007": ("the run has no verdict yet", "If the job has ended, its Driver was stopped before it could write FAILED: run make postflight RUN_ID=... to judge what it left."),
    "RPT-E020": ("a record's field has the wrong type or is out of range", "The page leaves those fields out. Records are written by the bundle: re-run make postflight RUN_ID=... to rewrite verification.json and actor-placement.json; inputs.json, preflight.json and run.json come only from the run itself."),
    "RPT-E021": ("driver.log holds malformed launcher phase lines", "The launcher writes 'phase NAME started <UTC time>' and 'phase NAME ended with status N after S s'; other lines that look like them were written by something else and are left out of the timeline."),
    "RPT-E022": ("more checkpoint shard files than the page lists", "The page lists the first shard files it finds; postflight's checkpoint check judges the step it needs."),
}


def markdown_table() -> str:
    """Every finding id with its meaning and fix (verify-two-worker-grpo-v1.py catalog)."""
    rows = ["| id | what it means | what to do |", "| --- | --- | --- |"]
    rows += [f"| `{fid}` | {title} | {hint} |" for fid, (title, hint) in CATALOG.items()]
    return "\n".join(rows) + "\n"


FAMILIES = {"LAUNCH": "the launcher, before and between phases", "GEN": "any phase: usage, disk, bugs",
            "INP": "the inputs phase and make verify-inputs", "PRE": "preflight, on the cluster",
            "RES": "the resume phase (RESUME_FROM)", "POST": "postflight, from the run folder",
            "RPT": "make report and make runs"}


def markdown_page() -> str:
    """docs/findings.md: the table with a short preface (make findings-doc writes it)."""
    families = "\n".join(f"- `{name}-…`: {text}" for name, text in FAMILIES.items())
    return ("# Every finding id and its fix\n\n"
            "<!-- generated by `make findings-doc` from twgrpo/run/catalog.py; "
            "tests/py/test_docs.py keeps it equal -->\n\n"
            "Each finding the bundle prints is `object: (ID) message` followed by `HINT: what to do`."
            " `-E` ids fail the phase, `-W` ids warn. The first word says where it comes from:\n\n"
            f"{families}\n\n" + markdown_table())

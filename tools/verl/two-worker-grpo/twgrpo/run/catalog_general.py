"""Finding ids of any phase (GEN) and a profile's own values (PROF): id -> (what it means, what to do).

twgrpo/run/catalog.py joins the parts into CATALOG in the order docs/findings.md lists them."""
ENTRIES = {
    # General
    "GEN-E001": ("a check crashed", "This is a bug in the verifier; report it with the traceback in the JSON record."),
    "GEN-E002": ("a record or marker could not be written", "The message names the file and the cause (no space left, read-only file system): free space or remount read-write, then run the phase again (make postflight RUN_ID=...). Nothing half-written is left behind."),
    "GEN-E003": ("the disk refused an operation", "The message names the path and the cause; check the volume's space, permissions and mount."),
    "GEN-E004": ("a record's path is a symlink", "Records are written only as plain files: remove the symlink (it may point into another run) and run the phase again."),
    "GEN-E020": ("a path to write is not a regular file", "Records, pages and profiles are written only as regular files: the path names a device, FIFO, socket or folder (e.g. REPORT_HTML=/dev/null); name a regular file or a new path."),
    "GEN-E130": ("make prune: KEEP or PREP_ROOT cannot be used", "Set KEEP=<how many of the newest installed versions to keep, at least 1> and PREP_ROOT= to this box's mount of the volume; nothing was removed."),
    "GEN-E131": ("make prune: a version folder could not be removed", "Check the folder's permissions and the volume; a folder renamed to .removing-<version> is no longer found by any Driver command and can be removed by hand."),
    "GEN-E050": ("EXTRA_OVERRIDES sets a key the bundle owns", "Paths, topology, sizes, names, loggers, validation, the Ray address and Hydra's folders come from the bundle: set the profile value the message names (TRAIN_BATCH_SIZE, NODES, TEST_FREQ, LEARNING_RATE, ...), so that the report shows what ran, or drop the override."),
    "GEN-E052": ("EXTRA_OVERRIDES names code or a file outside the pinned inputs", "A key that makes verl import a module or class (custom_cls, sampler, external_lib, override_config, _target_) or read or write a file (*.path, *_path, *_dir, *_file), or any value that is a path or URL, is not covered by the run's pins: drop the override; a custom reward goes in REWARD_FILE and REWARD_FUNCTION, pinned like the data."),
    "GEN-E053": ("EXTRA_OVERRIDES names a key the pinned verl's trainer config does not have", "Hydra would refuse it after the job has its GPUs (or, with a +, add a key nothing reads): use the key the message suggests (did you mean ...?), or look it up in verl/trainer/config/_generated_ppo_trainer.yaml of the pinned checkout."),
    "GEN-E054": ("EXTRA_OVERRIDES adds with '+' a key verl's config already has", "Hydra refuses to add a key that exists: write key=value without the '+' (or '++key=value' to set it either way)."),
    "GEN-E055": ("the pinned verl's trainer config cannot be read", "EXTRA_OVERRIDES are checked against verl/trainer/config/_generated_ppo_trainer.yaml of the pinned checkout: the message names the file and the cause; check the checkout (make verify-inputs)."),
    "GEN-W050": ("EXTRA_OVERRIDES not checked against verl's trainer config (no checkout here)", "Give check-profile the volume that holds the pinned verl (make check-profile PREP_ROOT=<mount>, or --verl-root=<checkout>); preflight checks them in the job in any case, before GPU time."),
    "GEN-E051": ("EXTRA_OVERRIDES holds a word that is not one Hydra override", "Write space-separated Hydra overrides, each key=value (or +key=value, ~key), values without spaces, each key once."),
    # A profile's own values, wherever it is read (exit 2: nothing is checked with it)
    "PROF-E001": ("a profile line is not KEY=value", "Write one KEY=value per line (no quotes, no spaces around '=', no expansion); '#' starts a comment line."),
    "PROF-E002": ("a profile names a key the bundle does not know", "Fix the spelling (the message suggests the nearest key), or drop the line; docs/your-cluster.md lists every key."),
    "PROF-E003": ("a profile sets a key twice", "Keep one line for the key: which of the two was meant is not guessed."),
    "PROF-E004": ("a profile lacks a required key", "Add the key (the message says what it holds); make new-profile FROM=<profile> starts from a complete one."),
    "PROF-E005": ("a profile value is not valid for its key", "Use a value of the form the message names (words such as ib, sglang or true in any case; the message suggests the nearest); TARGET_STEPS=auto needs a train split of at least one full batch."),
    "PROF-E006": ("a profile's PROFILE_NAME differs from its file name", "Rename the file or set PROFILE_NAME to its name: runs, reports and resumes name the profile by it."),
    "PROF-E008": ("an installed site profile differs from the sha256 its file name pins", "The file under two-worker-grpo-profiles/ on the volume was changed after make install-tools: move it away and install the site's profiles again (make install-tools SITE=<folder> PREP_ROOT=<volume>)."),
    "PROF-E007": ("a profile changed after make checksums", "What is printed or submitted from an edited profile would not be what the job reads (the installed, pinned bytes): run make checksums, then make install-tools, or undo the edit."),
}

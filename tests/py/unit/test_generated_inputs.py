"""Generated smoke inputs are deterministic (the smoke profile pins them), valid for their
oracles (tokenizers, pyarrow, the safetensors layout), and never overwrite what differs."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from twgrpo.formats import safetensors
from twgrpo.cli import main
from twgrpo.run.profile import load_profile

REPO = Path(__file__).resolve().parents[3]
WHEEL = REPO / ".cache" / "wheels" / "verl-0.6.0-py3-none-any.whl"
GENERATE = REPO / "dev" / "generate-inputs.py"
STANDIN = REPO / "tests" / "fixtures" / "verl-standin"


def generate(root, *source):
    return subprocess.run([sys.executable, str(GENERATE), "--storage-root", str(root), "--profile",
                           "smoke-1x1", *source], capture_output=True, text=True)


@pytest.mark.skipif(not WHEEL.is_file(), reason=f"needs {WHEEL.name} (tests/run.sh downloads it)")
def test_generation_reproduces_the_smoke_profiles_pins_and_verifies(tmp_path, capsys):
    out = generate(tmp_path, "--verl-wheel", str(WHEEL))
    assert out.returncode == 0, out.stderr
    assert main(["inputs", "--profile", "smoke-1x1", "--storage-root", str(tmp_path)]) == 0
    assert "inputs: PASSED" in capsys.readouterr().out


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen")
    out = generate(root, "--verl-source", str(STANDIN), "--unpinned")
    assert out.returncode == 0, out.stderr
    return root


def test_model_and_data_pins_hold_whatever_the_verl_source(generated):
    profile = load_profile("smoke-1x1")
    import hashlib
    for folder, pin in ((profile.model_root(generated), profile.MODEL_SUMS_SHA256),
                        (profile.data_root(generated), profile.DATA_SUMS_SHA256)):
        assert hashlib.sha256((folder / "SHA256SUMS").read_bytes()).hexdigest() == pin


def test_the_tokenizer_works_in_the_tokenizers_library(generated):
    tokenizers = pytest.importorskip("tokenizers")
    folder = load_profile("smoke-1x1").model_root(generated)
    tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    text = "<|im_start|>user\nAva has 12 apples and gets 3 more.<|im_end|>\n<|im_start|>assistant\n"
    encoded = tok.encode(text)
    assert tok.decode(encoded.ids, skip_special_tokens=False) == text
    assert encoded.tokens[0] == "<|im_start|>"
    config = json.loads((folder / "config.json").read_text())
    assert tok.get_vocab_size() == config["vocab_size"] == 512
    assert tok.token_to_id("<|im_end|>") == config["eos_token_id"]
    assert tok.token_to_id("<|endoftext|>") == config["pad_token_id"]


def test_the_weights_hold_every_qwen2_tensor(generated):
    folder = load_profile("smoke-1x1").model_root(generated)
    info = safetensors.inspect(folder / "model.safetensors")
    header_len = int.from_bytes((folder / "model.safetensors").read_bytes()[:8], "little")
    header = json.loads((folder / "model.safetensors").read_bytes()[8:8 + header_len])
    names = set(header) - {"__metadata__"}
    assert info["tensors"] == len(names) == 2 + 2 * 12
    assert "model.layers.1.self_attn.k_proj.bias" in names and "lm_head.weight" not in names
    assert header["model.embed_tokens.weight"]["shape"] == [512, 128]


def test_the_parquet_rows_are_verl_gsm8k_rows(generated):
    pq = pytest.importorskip("pyarrow.parquet")
    rows = pq.read_table(load_profile("smoke-1x1").data_root(generated) / "train.parquet").to_pylist()
    assert len(rows) == 64
    first = rows[0]
    assert first["data_source"] == "openai/gsm8k" and first["ability"] == "math"
    assert first["prompt"][0]["role"] == "user"
    assert first["prompt"][0]["content"].endswith('output the final answer after "####".')
    assert first["extra_info"]["answer"].endswith(f"#### {first['reward_model']['ground_truth']}")


def test_running_again_keeps_identical_folders(generated):
    out = generate(generated, "--verl-source", str(STANDIN), "--unpinned")
    assert out.returncode == 0
    assert out.stdout.count("kept (identical)") == 3


def test_a_folder_that_differs_is_never_overwritten(tmp_path):
    assert generate(tmp_path, "--verl-source", str(STANDIN), "--unpinned").returncode == 0
    config = load_profile("smoke-1x1").model_root(tmp_path) / "config.json"
    config.write_text(config.read_text().replace('"hidden_size": 128', '"hidden_size": 64'))
    before = config.read_text()
    out = generate(tmp_path, "--verl-source", str(STANDIN), "--unpinned")
    assert out.returncode == 1
    assert "exists and differs in 1 files (config.json); nothing was overwritten" in out.stderr
    assert config.read_text() == before


def test_a_half_written_folder_from_a_crash_is_redone(tmp_path):
    data = load_profile("smoke-1x1").data_root(tmp_path)
    partial = data.parent / f".{data.name}.partial"
    partial.mkdir(parents=True)
    (partial / "train.parquet").write_bytes(b"torn")
    assert generate(tmp_path, "--verl-source", str(STANDIN), "--unpinned").returncode == 0
    assert not partial.exists() and (data / "train.parquet").stat().st_size > 1000

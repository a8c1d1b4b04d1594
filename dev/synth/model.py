"""A tiny Qwen2 causal LM with random weights, written as safetensors without torch.

Weights come from Python's Mersenne Twister (random.random is reproducible across Python
versions) and are stored as bfloat16 by truncation, so the bytes depend only on the seed.
"""
from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Dict, List, Tuple

from . import tokenizer as tok

ARCH = {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
        "max_position_embeddings": 1024}
INIT_RANGE = 0.02


def tensor_shapes(arch: Dict[str, int]) -> List[Tuple[str, List[int], str]]:
    """(name, shape, init) of every Qwen2ForCausalLM tensor; the LM head is tied to embeddings."""
    h, inter, vocab = arch["hidden_size"], arch["intermediate_size"], arch["vocab_size"]
    kv = h // arch["num_attention_heads"] * arch["num_key_value_heads"]
    shapes = [("model.embed_tokens.weight", [vocab, h], "random"), ("model.norm.weight", [h], "ones")]
    for layer in range(arch["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        shapes += [
            (f"{p}.input_layernorm.weight", [h], "ones"),
            (f"{p}.post_attention_layernorm.weight", [h], "ones"),
            (f"{p}.self_attn.q_proj.weight", [h, h], "random"),
            (f"{p}.self_attn.q_proj.bias", [h], "zeros"),
            (f"{p}.self_attn.k_proj.weight", [kv, h], "random"),
            (f"{p}.self_attn.k_proj.bias", [kv], "zeros"),
            (f"{p}.self_attn.v_proj.weight", [kv, h], "random"),
            (f"{p}.self_attn.v_proj.bias", [kv], "zeros"),
            (f"{p}.self_attn.o_proj.weight", [h, h], "random"),
            (f"{p}.mlp.gate_proj.weight", [inter, h], "random"),
            (f"{p}.mlp.up_proj.weight", [inter, h], "random"),
            (f"{p}.mlp.down_proj.weight", [h, inter], "random"),
        ]
    return sorted(shapes)


def _bf16(values: List[float]) -> bytes:
    packed = struct.pack(f"<{len(values)}f", *values)
    out = bytearray(2 * len(values))
    out[0::2] = packed[2::4]  # the high half of each little-endian float32
    out[1::2] = packed[3::4]
    return bytes(out)


def write_safetensors(path: Path, seed: int, arch: Dict[str, int]) -> int:
    rng = random.Random(seed)
    bound = INIT_RANGE * 3 ** 0.5  # uniform with standard deviation INIT_RANGE
    header, blobs, offset = {}, [], 0
    for name, shape, init in tensor_shapes(arch):
        count = 1
        for dim in shape:
            count *= dim
        if init == "random":
            blob = _bf16([(2 * rng.random() - 1) * bound for _ in range(count)])
        else:
            blob = _bf16([1.0 if init == "ones" else 0.0] * count)
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":"), sort_keys=True).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as stream:
        stream.write(struct.pack("<Q", len(raw)) + raw)
        for blob in blobs:
            stream.write(blob)
    return sum(1 for _ in blobs)


def write_model(folder: Path, seed: int, corpus: List[str]) -> None:
    """config.json, generation_config.json, model.safetensors and a trained tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    arch = dict(ARCH)
    vocab, merges = tok.train_bpe(corpus, arch["vocab_size"] - len(tok.SPECIAL_TOKENS))
    ids = tok.save(folder, vocab, merges, arch["max_position_embeddings"])
    config = {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", **arch,
        "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "initializer_range": INIT_RANGE, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
        "use_cache": True, "use_sliding_window": False, "sliding_window": None,
        "max_window_layers": arch["num_hidden_layers"], "attention_dropout": 0.0,
        "bos_token_id": ids[tok.PAD], "eos_token_id": ids[tok.IM_END], "pad_token_id": ids[tok.PAD],
    }
    generation = {"bos_token_id": ids[tok.PAD], "eos_token_id": ids[tok.IM_END],
                  "pad_token_id": ids[tok.PAD], "do_sample": True}
    for name, data in (("config.json", config), ("generation_config.json", generation)):
        (folder / name).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    write_safetensors(folder / "model.safetensors", seed, arch)

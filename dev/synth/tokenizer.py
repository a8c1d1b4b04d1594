"""Train a byte-level BPE tokenizer with the standard library and save it in Hugging Face format.

Deterministic: the same corpus gives the same merges on any machine (ties break by the pair).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)
# A Qwen2-style chat template: verl applies it to each prompt's messages.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}")
# GPT-2's pre-tokenizer split, with \p{L} and \p{N} spelled for Python's re.
WORDS = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""")


def bytes_to_unicode() -> Dict[int, str]:
    """GPT-2's map from bytes to printable characters, which byte-level BPE tokens are made of."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars = keep[:]
    extra = 0
    for byte in range(256):
        if byte not in keep:
            keep.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(keep, chars)}


def train_bpe(texts: Iterable[str], vocab_size: int) -> Tuple[Dict[str, int], List[Tuple[str, str]]]:
    """Merge the most frequent adjacent pair until vocab_size tokens (specials not counted)."""
    alphabet = bytes_to_unicode()
    words = Counter()
    for text in texts:
        for word in WORDS.findall(text):
            words[tuple(alphabet[b] for b in word.encode("utf-8"))] += 1
    vocab = {alphabet[b]: i for i, b in enumerate(sorted(alphabet))}
    merges: List[Tuple[str, str]] = []
    corpus = dict(words)
    while len(vocab) < vocab_size:
        pairs = Counter()
        for word, count in corpus.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        merged = best[0] + best[1]
        merges.append(best)
        vocab[merged] = len(vocab)
        corpus = {_merge(word, best, merged): count for word, count in corpus.items()}
    return vocab, merges


def _merge(word: Tuple[str, ...], pair: Tuple[str, str], merged: str) -> Tuple[str, ...]:
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(merged)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def save(folder: Path, vocab: Dict[str, int], merges: List[Tuple[str, str]],
         model_max_length: int) -> Dict[str, int]:
    """Write tokenizer.json and tokenizer_config.json; return the special tokens' ids."""
    specials = {token: len(vocab) + i for i, token in enumerate(SPECIAL_TOKENS)}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": token, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}
                         for token, i in specials.items()],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": None,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": model_max_length,
              "bos_token": None, "eos_token": IM_END, "pad_token": PAD, "unk_token": None,
              "clean_up_tokenization_spaces": False, "chat_template": CHAT_TEMPLATE,
              "added_tokens_decoder": {str(i): {"content": token, "lstrip": False,
                                                "normalized": False, "rstrip": False,
                                                "single_word": False, "special": True}
                                       for token, i in specials.items()}}
    _dump(folder / "tokenizer.json", tokenizer)
    _dump(folder / "tokenizer_config.json", config)
    return specials


def _dump(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n",
                    encoding="utf-8")

"""Deterministic stand-ins for the hub's inputs, for the smoke run and tests only: a tiny random
Qwen2, a locally trained tokenizer and GSM8K-style arithmetic problems."""

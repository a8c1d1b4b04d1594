"""HF-generate rollout for verl 0.6.0 (ROLLOUT_ENGINE=hf), for machines without SGLang or vLLM.

verl 0.6.0 ships HFRollout but does not register ("hf", "sync"), and HFRollout predates the
BaseRollout interface (resume, update_weights, release; verl issue #4424). This adapter keeps
a plain Hugging Face copy of the policy on the GPU, copies the actor's weights into it in
update_weights, and generates with HFRollout's own code.

verl imports this module through ``actor_rollout_ref.model.external_lib`` in every worker,
just before it looks the rollout class up, so the pinned verl checkout stays untouched.
The module must be importable on every node (the smoke run puts rollout/ on PYTHONPATH);
preflight checks that.
"""
import asyncio

import torch
from transformers import AutoModelForCausalLM

from verl.utils.device import get_device_name
from verl.workers.rollout import base
from verl.workers.rollout.hf_rollout import HFRollout


def _ensure_event_loop() -> None:
    # verl's _build_rollout calls asyncio.get_event_loop(), which raises in a Ray actor under
    # uvloop's policy ("There is no current event loop"): give this thread a loop first.
    try:
        asyncio.get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())


class HFGenerateRollout(HFRollout):
    def __init__(self, config, model_config, device_mesh):
        base.BaseRollout.__init__(self, config, model_config, device_mesh)  # not HFRollout's
        _ensure_event_loop()
        attention = (model_config.override_config or {}).get("_attn_implementation", "eager")
        module = AutoModelForCausalLM.from_pretrained(
            model_config.local_path, torch_dtype=torch.bfloat16, attn_implementation=attention,
            trust_remote_code=model_config.trust_remote_code)
        self.module = module.to(get_device_name()).eval()

    async def resume(self, tags):
        """Weights and KV cache live in the HF module all the time: nothing to reload."""

    async def release(self):
        """Nothing to free: the HF module is small next to the FSDP actor it mirrors."""

    async def update_weights(self, weights, **kwargs):
        """Copy the actor's full weights (HF names) into the generation copy."""
        params = dict(self.module.named_parameters())
        seen = set()
        with torch.no_grad():
            for name, tensor in weights:
                if name in params:
                    params[name].copy_(tensor.to(params[name].device, params[name].dtype))
                    seen.add(name)
        missing = set(params) - seen
        if missing:
            raise RuntimeError(f"update_weights left {len(missing)} parameters stale: "
                               f"{sorted(missing)[:5]}")


base._ROLLOUT_REGISTRY[("hf", "sync")] = f"{__name__}.{HFGenerateRollout.__name__}"

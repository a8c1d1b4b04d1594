"""The stub nvidia-smi's GPU table (tests/stubs/nvidia-smi reads it from NVIDIA_SMI_STUB): one
row per GPU, healthy unless a test plants a fault in it."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

# A healthy GPU's answers to the health fields, as nvidia-smi prints them on an A100 SXM
# (--format=csv,noheader,nounits): no ECC errors, row remapping instead of page retirement, MIG
# off, no clock event reasons, no NVLink fabric registration on this generation.
HEALTHY = {"ecc.errors.uncorrected.volatile.total": "0", "retired_pages.pending": "[N/A]",
           "remapped_rows.pending": "No", "remapped_rows.failure": "No",
           "mig.mode.current": "Disabled", "compute_mode": "Default",
           "clocks_event_reasons.hw_slowdown": "Not Active",
           "clocks_event_reasons.hw_thermal_slowdown": "Not Active",
           "clocks_event_reasons.hw_power_brake_slowdown": "Not Active",
           "clocks_event_reasons.sw_thermal_slowdown": "Not Active",
           "fabric.state": "N/A", "fabric.status": "N/A"}


def gpus_csv(path: Path, count: int, model: str = "NVIDIA A100-SXM4-80GB",
             driver: str = "535.104.05", health: Optional[Dict[int, Dict[str, str]]] = None) -> None:
    """The stub nvidia-smi's table; health[i] replaces GPU i's health answers."""
    rows = [",".join(["index,name,memory.total,driver_version,pci.bus_id,uuid", *HEALTHY])]
    for i in range(count):
        values = {**HEALTHY, **(health or {}).get(i, {})}
        rows.append(",".join([f"{i},{model},81920,{driver},00000000:{7 + 4 * i:02X}:00.0,"
                              f"GPU-{i:08d}-0000-4000-8000-000000000000", *values.values()]))
    path.write_text("\n".join(rows) + "\n")

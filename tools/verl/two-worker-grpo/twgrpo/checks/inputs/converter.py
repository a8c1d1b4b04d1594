"""The profile's data converter (DATA_CONVERTER): the script make prepare-inputs ran to write the
data. The data folder's SHA256SUMS pins what verl reads; this pins what made it, so the record
names the converter, and a converter edited after pinning, or data another one made, is refused:
the pinned script would no longer make the pinned data.
"""
from __future__ import annotations

from typing import List

from ...formats import bounded
from ...run.findings import Finding, mismatch
from .reward import check_pinned_script

MAX_MANIFEST = 1 << 20  # dataset-manifest.json is a few hundred bytes


def check_data_converter(ctx) -> List[Finding]:
    """ctx: inputs.InputsContext. Records data_converter_sha256 in its evidence."""
    p = ctx.profile
    path = p.converter_path(ctx.storage_root)
    if path is None:
        return []
    found = check_pinned_script(ctx, path, "DATA_CONVERTER", "DATA_CONVERTER_SHA256", "INP-E082",
                                "INP-E083", "data_converter_sha256")
    if found is not None:
        return found
    manifest_path = ctx.data_root / "dataset-manifest.json"
    try:  # unreadable: dataset-manifest says so (INP-E010)
        manifest = bounded.read_object(manifest_path, MAX_MANIFEST)
    except bounded.Unreadable:
        return []
    made_by = manifest.get("converter_sha256")
    if made_by != p.DATA_CONVERTER_SHA256:
        return [mismatch("INP-E084", str(manifest_path), "sha256 of the converter that made the "
                         "data", p.DATA_CONVERTER_SHA256, made_by, file=p.DATA_CONVERTER)]
    return []

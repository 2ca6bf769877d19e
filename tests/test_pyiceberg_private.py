"""lakerules extends pyiceberg's private snapshot producers and metrics evaluators (commit.py,
row_plans.py, history.py), so pyproject.toml pins pyiceberg to one minor. This test fails, by
name, when any of them changes: their source is fingerprinted, and the hooks lakerules overrides
must still be there. After a pyiceberg upgrade, review each changed name against lakerules'
use of it, then update the fingerprint here."""

from __future__ import annotations

import hashlib
import importlib
import inspect

import pyiceberg

PINNED_MINOR = "0.12"
# (module, name) -> sha256 of inspect.getsource, first 16 hex digits (pyiceberg 0.12.0).
FINGERPRINTS = {
    ("pyiceberg.expressions.visitors", "_InclusiveMetricsEvaluator"): "b72a9bc0acbbd345",
    ("pyiceberg.expressions.visitors", "_StrictMetricsEvaluator"): "d5853cf65ef45f6d",
    ("pyiceberg.table.update.snapshot", "_SnapshotProducer"): "69e876855f5aaf58",
    ("pyiceberg.table.update.snapshot", "_FastAppendFiles"): "8cbd4eebb28a9176",
    ("pyiceberg.table.update.snapshot", "_OverwriteFiles"): "079b50739816c4dc",
    ("pyiceberg.table.update.validate", "_added_data_files"): "6aa101e9160f7a43",
    ("pyiceberg.table.update.validate", "_validate_data_files_exist"): "bd7d3dda6e38d0cc",
    ("pyiceberg.table", "Transaction"): "c5f4bffcd558c908",
    ("pyiceberg.manifest", "ManifestWriterV2"): "2a803406c856034f",
}
# What lakerules' subclasses override or call on them (commit.py).
HOOKS = {
    ("pyiceberg.table.update.snapshot", "_SnapshotProducer"): [
        "_commit", "_process_manifests", "_cleanup_uncommitted", "_existing_manifests",
        "_deleted_entries", "_summary", "_validate_concurrency", "_manifests"],
    ("pyiceberg.manifest", "ManifestWriterV2"): ["_meta"],
    ("pyiceberg.table", "Transaction"): ["table_metadata"],
}


def _get(module: str, name: str):
    return getattr(importlib.import_module(module), name)


def test_the_pinned_minor():
    assert pyiceberg.__version__.startswith(PINNED_MINOR + "."), \
        f"pyiceberg {pyiceberg.__version__} is not the {PINNED_MINOR} lakerules pins (pyproject.toml)"


def test_the_private_classes_lakerules_extends_are_unchanged():
    changed = []
    for (module, name), expected in FINGERPRINTS.items():
        source = inspect.getsource(_get(module, name))
        if hashlib.sha256(source.encode()).hexdigest()[:16] != expected:
            changed.append(f"{module}.{name}")
    assert not changed, f"pyiceberg {pyiceberg.__version__} changed what lakerules extends: {changed}"


def test_the_overridden_hooks_exist():
    missing = [f"{m}.{n}.{h}" for (m, n), hooks in HOOKS.items() for h in hooks if not hasattr(_get(m, n), h)]
    assert not missing, f"pyiceberg {pyiceberg.__version__} lacks hooks lakerules overrides: {missing}"

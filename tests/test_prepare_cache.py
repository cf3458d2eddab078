"""The compressor's preparation is kept under the cache and restored from there.

``prepare_compressor(..., cache_dir=)`` keeps a verified preparation under
``<cache_dir>/compressor/<key>/`` and restores a missing folder from it (hardlinks, else
copies; atomically), without converting and without importing torch. Most tests use a
stand-in conversion (``prepare._convert``) that writes random bytes, so a second
conversion could never reproduce the first folder: equal bytes prove a restore. One
integration test does the real conversion and restores it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tersetalk
from tersetalk.encoders import prepare
from tersetalk.encoders.prepare import (
    CACHE_DIR,
    CACHE_INDEX,
    CACHE_LIBRARIES,
    CACHE_MODEL,
    MANIFEST,
    PREPARE_VERSION,
    cache_key,
    cache_key_material,
    is_prepared,
    prepare_compressor,
    read_manifest,
)

SHA = "ab" * 32


def fake_convert(calls: list):
    """A stand-in for the real conversion: a folder of random bytes with a manifest (a
    nested file and an owner-only file too, as ``model.safetensors`` is)."""

    def convert(out, src, source_sha256, *, threads, verify):
        calls.append(out)
        tmp = prepare._new_dir(out.parent, out.name)
        (tmp / "model.safetensors").write_bytes(os.urandom(4096))
        os.chmod(tmp / "model.safetensors", 0o600)
        (tmp / "config.json").write_text(json.dumps({"n": os.urandom(8).hex()}))
        (tmp / "sub").mkdir()
        (tmp / "sub" / "vocab.txt").write_bytes(os.urandom(100))
        manifest = {
            "prepare_version": PREPARE_VERSION,
            "source": str(src),
            "source_sha256": source_sha256,
            "seconds": int.from_bytes(os.urandom(2), "big"),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest))
        prepare._install(tmp, out)

    return convert


class Converted(Exception):
    """Raised by the stand-in that proves a restore: the conversion was asked for."""


def raising_convert(*args, **kwargs):
    raise Converted("converted although the cache holds this preparation")


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its relative name, bytes and mode."""
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mode)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """(gguf, out, cache, conversion calls), the stand-in conversion installed."""
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + os.urandom(1000))
    calls: list = []
    monkeypatch.setattr(prepare, "_convert", fake_convert(calls))
    return gguf, tmp_path / "models" / "smollm2-hf", tmp_path / "cache", calls


def entry_of(cache: Path, gguf: Path) -> Path:
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    return cache / CACHE_DIR / cache_key(digest)


def test_a_deleted_folder_is_restored_byte_for_byte_without_converting(setup, monkeypatch, caplog):
    gguf, out, cache, calls = setup
    prepare_compressor(out, gguf, cache_dir=cache)
    assert len(calls) == 1
    fresh = snapshot(out)
    entry = entry_of(cache, gguf)
    assert snapshot(entry / CACHE_MODEL) == fresh
    index = json.loads((entry / CACHE_INDEX).read_text())
    assert index["files"] == {name: len(data) for name, (data, _) in fresh.items()}
    assert index["material"]["source_sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest()
    # the digest was memoised in the workflow's fingerprints folder
    assert list((cache / "fingerprints").glob("*.sha256"))

    shutil.rmtree(out)  # what Snakemake does before it reruns the job
    monkeypatch.setattr(prepare, "_convert", raising_convert)
    with caplog.at_level(logging.INFO, logger="tersetalk.encoders.prepare"):
        assert prepare_compressor(out, gguf, cache_dir=cache) == out
    assert snapshot(out) == fresh  # same names, bytes and modes: the manifest too
    assert is_prepared(out, gguf) and read_manifest(out) == json.loads(fresh[MANIFEST][0])
    assert "restored from cache" in caplog.text
    for name in fresh:  # hardlinks of the entry's files, not copies
        assert (out / name).stat().st_ino == (entry / CACHE_MODEL / name).stat().st_ino
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temporary folder left


def test_a_folder_of_another_gguf_is_replaced_from_the_cache(setup, monkeypatch):
    gguf, out, cache, calls = setup
    prepare_compressor(out, gguf, cache_dir=cache)
    fresh = snapshot(out)
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["source_sha256"] = SHA
    shutil.rmtree(out)
    out.mkdir()
    (out / MANIFEST).write_text(json.dumps(manifest))
    (out / "stray.bin").write_bytes(b"x")
    monkeypatch.setattr(prepare, "_convert", raising_convert)
    prepare_compressor(out, gguf, cache_dir=cache)
    assert snapshot(out) == fresh


def test_restore_copies_where_hardlinks_fail(setup, monkeypatch, caplog):
    gguf, out, cache, calls = setup
    prepare_compressor(out, gguf, cache_dir=cache)
    fresh = snapshot(out)
    shutil.rmtree(out)

    def no_link(src, dst, *args, **kwargs):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(prepare.os, "link", no_link)
    monkeypatch.setattr(prepare, "_convert", raising_convert)
    with caplog.at_level(logging.INFO, logger="tersetalk.encoders.prepare"):
        prepare_compressor(out, gguf, cache_dir=cache)
    assert snapshot(out) == fresh
    cached = entry_of(cache, gguf) / CACHE_MODEL / "config.json"
    assert (out / "config.json").stat().st_ino != cached.stat().st_ino
    assert "0 files hardlinked, 4 copied" in caplog.text


def damage_missing_file(entry: Path) -> None:
    (entry / CACHE_MODEL / "sub" / "vocab.txt").unlink()


def damage_missing_manifest(entry: Path) -> None:
    (entry / CACHE_MODEL / MANIFEST).unlink()


def damage_size(entry: Path) -> None:
    path = entry / CACHE_MODEL / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-1])


def damage_index(entry: Path) -> None:
    (entry / CACHE_INDEX).unlink()


def damage_foreign_manifest(entry: Path) -> None:
    path = entry / CACHE_MODEL / MANIFEST
    text = path.read_text()
    manifest = json.loads(text)
    manifest["source_sha256"] = SHA[: len(manifest["source_sha256"])]
    path.write_text(json.dumps(manifest)[: len(text)].ljust(len(text)))  # the same size


@pytest.mark.parametrize(
    "damage",
    [damage_missing_file, damage_missing_manifest, damage_size, damage_index,
     damage_foreign_manifest],
)  # fmt: skip
def test_a_damaged_entry_is_ignored_and_replaced_by_a_conversion(setup, damage, caplog):
    gguf, out, cache, calls = setup
    prepare_compressor(out, gguf, cache_dir=cache)
    entry = entry_of(cache, gguf)
    shutil.rmtree(out)  # first, so that no hardlink of the damaged file is kept in out
    damage(entry)
    with caplog.at_level(logging.INFO, logger="tersetalk.encoders.prepare"):
        prepare_compressor(out, gguf, cache_dir=cache)
    assert len(calls) == 2  # converted again
    assert "is damaged" in caplog.text and "restored from cache" not in caplog.text
    assert is_prepared(out, gguf)
    # the fresh conversion overwrote the entry: complete, and the new folder's files
    assert snapshot(entry / CACHE_MODEL) == snapshot(out)
    assert [p.name for p in (cache / CACHE_DIR).iterdir()] == [entry.name]  # no leftovers


def test_an_interrupted_restore_leaves_no_folder(setup, monkeypatch):
    gguf, out, cache, calls = setup
    prepare_compressor(out, gguf, cache_dir=cache)
    fresh = snapshot(out)
    shutil.rmtree(out)
    real = prepare._link_or_copy
    done = []

    def killed_midway(src, dst):
        if done:
            raise KeyboardInterrupt  # as a kill between two files
        done.append(real(src, dst))
        return done[-1]

    monkeypatch.setattr(prepare, "_link_or_copy", killed_midway)
    monkeypatch.setattr(prepare, "_convert", raising_convert)
    with pytest.raises(KeyboardInterrupt):
        prepare_compressor(out, gguf, cache_dir=cache)
    assert list(out.parent.iterdir()) == []  # neither the folder nor a half one
    monkeypatch.setattr(prepare, "_link_or_copy", real)
    prepare_compressor(out, gguf, cache_dir=cache)
    assert snapshot(out) == fresh


def test_a_failed_restore_falls_back_to_converting(setup, monkeypatch, caplog):
    gguf, out, cache, calls = setup
    prepare_compressor(out, gguf, cache_dir=cache)
    shutil.rmtree(out)

    def vanished(src, dst):
        raise FileNotFoundError(2, "No such file", str(src))  # the entry replaced meanwhile

    monkeypatch.setattr(prepare, "_link_or_copy", vanished)
    with caplog.at_level(logging.WARNING, logger="tersetalk.encoders.prepare"):
        prepare_compressor(out, gguf, cache_dir=cache)
    assert len(calls) == 2 and is_prepared(out, gguf)
    assert "could not restore" in caplog.text


def test_force_converts_and_replaces_the_entry(setup):
    gguf, out, cache, calls = setup
    prepare_compressor(out, gguf, cache_dir=cache)
    first = snapshot(out)
    prepare_compressor(out, gguf, cache_dir=cache, force=True)
    assert len(calls) == 2 and snapshot(out) != first
    assert snapshot(entry_of(cache, gguf) / CACHE_MODEL) == snapshot(out)


def test_an_unverified_preparation_is_not_kept(setup):
    gguf, out, cache, calls = setup
    prepare_compressor(out, gguf, cache_dir=cache, verify=False)
    assert not entry_of(cache, gguf).exists()
    shutil.rmtree(out)
    prepare_compressor(out, gguf, cache_dir=cache, verify=True)
    assert len(calls) == 2 and entry_of(cache, gguf).is_dir()
    shutil.rmtree(out)  # an unverified request may restore a verified entry
    prepare_compressor(out, gguf, cache_dir=cache, verify=False)
    assert len(calls) == 2


def test_without_a_cache_dir_nothing_is_kept(setup):
    gguf, out, cache, calls = setup
    prepare_compressor(out, gguf)
    shutil.rmtree(out)
    prepare_compressor(out, gguf)
    assert len(calls) == 2 and not cache.exists()


def test_the_key_depends_on_the_gguf_the_versions_and_the_preparation(monkeypatch):
    versions = dict.fromkeys(CACHE_LIBRARIES, "1.0")
    key = cache_key(SHA, versions)
    assert key == cache_key(SHA, dict(versions)) and len(key) == 64
    assert cache_key("cd" * 32, versions) != key  # another GGUF misses
    for name in CACHE_LIBRARIES:  # any library's version
        assert cache_key(SHA, {**versions, name: "1.1"}) != key, name
        assert cache_key(SHA, {**versions, name: None}) != key, name
    assert {"transformers", "torch", "gguf"} <= set(CACHE_LIBRARIES)
    material = cache_key_material(SHA, versions)
    assert material["dtype"] == "float32" and material["verified"] is True
    monkeypatch.setattr(prepare, "PREPARE_VERSION", PREPARE_VERSION + 1)
    assert cache_key(SHA, versions) != key
    monkeypatch.setattr(prepare, "DTYPE", "bfloat16")
    monkeypatch.setattr(prepare, "PREPARE_VERSION", PREPARE_VERSION)
    assert cache_key(SHA, versions) != key


#: runs ``tersetalk *argv`` in a fresh interpreter, then writes the modules it imported
DRIVER = """
import json, sys
from tersetalk.cli import main
out, argv = sys.argv[1], sys.argv[2:]
code = None
try:
    code = main(argv)
except SystemExit as exc:
    code = exc.code
finally:
    with open(out, "w") as f:
        json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def test_a_restore_through_the_cli_imports_neither_torch_nor_transformers(setup, tmp_path):
    gguf, out, cache, calls = setup
    prepare_compressor(out, gguf, cache_dir=cache)  # the stand-in fills the cache
    fresh = snapshot(out)
    shutil.rmtree(out)
    report = tmp_path / "modules.json"
    src = str(Path(tersetalk.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src, "TERSETALK_EVENTS": "off"}
    argv = ["prepare-compressor", "--gguf", str(gguf), "--out", str(out),
            "--cache-dir", str(cache)]  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(report), *argv], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    result = json.loads(report.read_text())
    assert result["code"] in (0, None), proc.stderr
    assert "restored from cache" in proc.stderr, proc.stderr
    imported = {m.split(".")[0] for m in result["modules"]}
    assert not imported & {"torch", "transformers", "gguf", "safetensors", "tokenizers"}
    assert snapshot(out) == fresh  # a real conversion of this fake GGUF would have failed


# -- the real conversion -------------------------------------------------------------------


@pytest.mark.integration
def test_a_real_preparation_is_restored_byte_for_byte(prepared_cached, tmp_path, monkeypatch,
                                                      caplog):  # fmt: skip
    """The embedded GGUF converted once into a cache (the session's preparation, about
    30 s the first time on a machine), then restored."""
    folder, shared = prepared_cached
    # this test damages its cache: a copy of the session's, its files hardlinked
    cache = tmp_path / "cache"
    shutil.copytree(shared, cache, copy_function=os.link)
    out = tmp_path / "models" / "smollm2-hf"

    def digests(folder: Path) -> dict[str, str]:  # every byte, without holding 540 MB
        return {
            p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }

    fresh, manifest = digests(folder), read_manifest(folder)
    assert {"config.json", "model.safetensors", "tokenizer.json", MANIFEST} <= set(fresh)
    (entry,) = (cache / CACHE_DIR).iterdir()
    monkeypatch.setattr(prepare, "_convert", raising_convert)
    with caplog.at_level(logging.INFO, logger="tersetalk.encoders.prepare"):
        prepare_compressor(out, cache_dir=cache, threads=1)
    assert "restored from cache" in caplog.text
    assert digests(out) == fresh and read_manifest(out) == manifest and is_prepared(out)

    # a damaged entry is not restored: the conversion is asked for again
    (entry / CACHE_MODEL / "tokenizer.json").unlink()
    shutil.rmtree(out)
    with pytest.raises(Converted):
        prepare_compressor(out, cache_dir=cache, threads=1)
    assert not out.exists()

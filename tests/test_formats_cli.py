"""``tersetalk formats``: encode, decode, savings, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tersetalk.formats.tree import same_value

DATA = Path(__file__).resolve().parents[1] / "data" / "toolresponses"


def tt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tersetalk", "formats", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def bodies(tmp_path_factory):
    """A few corpus bodies of different shapes, written as files a user would have."""
    d = tmp_path_factory.mktemp("payloads")
    rows = [json.loads(x) for x in (DATA / "json.jsonl").read_text().splitlines()]
    out = {}
    for shape in ("array_of_objects", "nested_object", "flat_object"):
        r = next(r for r in rows if r["shape"] == shape)
        p = d / f"{shape}.json"
        p.write_text(json.dumps(r["body"], indent=2))
        out[shape] = (p, r["body"])
    return out


def test_encode_then_decode_gives_the_exact_json(bodies):
    for path, body in bodies.values():
        enc = tt("encode", str(path))
        assert enc.returncode == 0, enc.stderr
        dec = tt("decode", stdin=enc.stdout)  # through stdin, as in a pipe
        assert dec.returncode == 0, dec.stderr
        assert same_value(json.loads(dec.stdout), body)


def test_every_encoder_round_trips_where_it_can(bodies):
    path, body = bodies["array_of_objects"]
    for encoder in ("json_compact", "json_pretty", "toon"):
        enc = tt("encode", str(path), "--encoder", encoder)
        assert enc.returncode == 0, enc.stderr
        assert same_value(json.loads(tt("decode", stdin=enc.stdout).stdout), body)
    refused = tt("encode", str(path), "--encoder", "csv")
    assert refused.returncode == 2 and "eligible:" in refused.stderr


def test_explain_and_budget(bodies):
    path, _ = bodies["nested_object"]
    full = tt("encode", str(path), "--explain")
    assert "compact JSON" in full.stderr and "lossless" in full.stderr
    cut = tt(
        "encode",
        str(path),
        "--budget",
        "120",
        "--explain",
        "--value",
        "priority",
        "--priority",
        "id",
        "name",
    )
    assert cut.returncode == 0, cut.stderr
    assert "> [+" in cut.stdout and "lossy" in cut.stderr
    lossy = tt("decode", stdin=cut.stdout)
    assert lossy.returncode == 2 and "leaves out" in lossy.stderr
    tiny = tt("encode", str(path), "--budget", "2")
    assert tiny.returncode == 2 and "raise --budget" in tiny.stderr


def test_markdown_tables_and_savings(tmp_path, bodies):
    doc = json.loads((DATA / "markdown.jsonl").read_text().splitlines()[1])["text"]
    md = tmp_path / "doc.md"
    md.write_text(doc)
    enc = tt("encode", str(md), "--explain")
    assert enc.returncode == 0 and "tables re-encoded" in enc.stderr
    sav = tt("savings", str(md), *(str(p) for p, _ in bodies.values()), "--format", "csv")
    assert sav.returncode == 0, sav.stderr
    header = sav.stdout.splitlines()[0].split(",")
    assert {"encoder", "baseline", "tokenizer", "savings_vs_json_compact_pct"} <= set(header)
    assert "mckp" in sav.stdout and "json_compact" in sav.stdout


def test_markdown_encode_then_decode_gives_the_source_back_byte_for_byte(tmp_path):
    doc = (
        "# Runs\n\n| name  | tokens |\n|-------|-------:|\n"
        + "".join(f"| run-{i} | {i * 1013:>6} |\n" for i in range(15))
        + "\nThe end.\n"
    )
    md = tmp_path / "doc.md"
    md.write_text(doc)
    enc = tt("encode", str(md))
    assert enc.returncode == 0 and "```tt:" in enc.stdout
    back = tt("decode", stdin=enc.stdout)
    assert back.returncode == 0, back.stderr
    assert back.stdout == doc


def test_bad_input_says_what_to_do(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": ')
    out = tt("encode", str(bad))
    assert out.returncode == 2 and "neither JSON nor Markdown" in out.stderr
    missing = tt("encode", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "not a readable file" in missing.stderr
    garbage = tt("decode", stdin="> [encoded: mckp]\nnot a kv line\n")
    assert garbage.returncode == 2 and "error:" in garbage.stderr


def test_help_explains_every_command():
    out = tt("--help")
    for cmd in ("encode", "decode", "savings", "experiment", "plot"):
        assert cmd in out.stdout
    enc = tt("encode", "--help")
    for opt in ("--encoder", "--budget", "--method", "--tokenizer", "--explain", "--priority"):
        assert opt in enc.stdout

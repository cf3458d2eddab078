"""Generate the golden transcripts (run ONCE, on the code the goldens must pin).

    PYTHONPATH=/path/to/checkout/src python tests/golden/make_golden.py [--only NAME ...]

Runs every case of ``cases.py`` twice on the ``tersetalk`` that is imported (the one
PYTHONPATH points at) and fails if the two runs differ (a non-deterministic column
would make the golden useless); then writes ``cases/<name>.json.gz`` and
``index.json`` (the commit of the checkout, each case's rows, model calls, size, and
which doubles it really used). ``config.yaml`` is copied from that checkout's
``config/config.yaml`` so the goldens do not move when the live config does.
Regenerating on the same code gives byte-identical files.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cases as golden  # noqa: E402


def source_repo() -> Path:
    import tersetalk

    return Path(tersetalk.__file__).resolve().parents[2]


def git(repo: Path, *args: str) -> str:
    res = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    return res.stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="regenerate just these cases")
    ap.add_argument("--once", action="store_true", help="skip the second (determinism) run")
    args = ap.parse_args()
    # error rows are expected in some cases; their tracebacks are noise here
    logging.getLogger("tersetalk.pipeline.runner").setLevel(logging.CRITICAL)

    import tersetalk

    src = source_repo()
    commit = git(src, "rev-parse", "HEAD")
    dirty = git(
        src, "status", "--porcelain", "--untracked-files=no", "--", "src", "config", "workflow"
    )
    print(f"tersetalk from {tersetalk.__file__}\ncommit {commit}" + (" (DIRTY)" if dirty else ""))
    if not args.only:
        shutil.copyfile(src / "config" / "config.yaml", golden.CONFIG)

    cases = golden.all_cases()
    if args.only:
        unknown = set(args.only) - {c.name for c in cases}
        if unknown:
            print(f"unknown cases: {sorted(unknown)}", file=sys.stderr)
            return 2
        cases = [c for c in cases if c.name in args.only]
    index = json.loads(golden.INDEX.read_text()) if golden.INDEX.exists() else {"cases": {}}
    nondeterministic: dict[str, list[str]] = {}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        tmp = Path(tmp)
        samples = golden.write_samples(tmp)
        for i, case in enumerate(cases):
            t0 = time.perf_counter()
            snap = golden.run_case(case, samples, tmp / f"{i}a")
            took = time.perf_counter() - t0
            if not args.once:
                again = golden.run_case(case, samples, tmp / f"{i}b")
                diff = golden.compare(snap, again)
                if diff:
                    nondeterministic[case.name] = diff
            from tersetalk.core.records import TIMING_COLUMNS

            expected = [
                c
                for c in snap["columns"]
                if c not in TIMING_COLUMNS and not c.startswith(("t_", "c_t_"))
            ]
            assert sorted(snap["values"]) == sorted(expected), case.name
            path = golden.write_golden(snap)
            errors = [e for e in snap["values"]["error"] if e is not None]
            index["cases"][case.name] = {
                "task": case.task,
                "system": case.system,
                "variant": case.variant,
                "rows": len(snap["values"]["example_id"]),
                "error_rows": len(errors),
                "model_calls": len(snap["model_calls"]),
                "uses_compressor": bool(snap["compressor_calls"]),
                "uses_embedder": bool(snap["embedder_calls"]),
                "bytes": path.stat().st_size,
                "note": case.note,
            }
            print(
                f"{case.name:48s} rows {index['cases'][case.name]['rows']} "
                f"errors {len(errors)} calls {len(snap['model_calls']):3d} "
                f"{path.stat().st_size:7d} B {took:5.2f} s"
            )
    names = {c.name for c in golden.all_cases()}
    if not args.only:
        for stale in golden.CASES_DIR.glob("*.json.gz"):
            if stale.name.removesuffix(".json.gz") not in names:
                stale.unlink()
        index["cases"] = {k: v for k, v in index["cases"].items() if k in names}
    index.update(
        commit=commit,
        dirty=bool(dirty),
        generated_with=f"python {platform.python_version()}",
        sample={"seed": golden.SAMPLE_SEED, "n": golden.SAMPLE_N, "tasks": list(golden.TASKS)},
        doubles=(
            "ScriptedClient + golden Responder; LLMLingua = ScriptedCompressor patched in for "
            "tersetalk.encoders.lingua.load_compressor in every case; MiniLM = FakeEmbedder "
            "(word Jaccard) patched in for EmbeddingJudge.embedder and SemanticJudge.embedder "
            "in every case. uses_compressor / uses_embedder: the case really reached them."
        ),
        total_bytes=sum(p.stat().st_size for p in golden.CASES_DIR.glob("*.json.gz")),
    )
    index["cases"] = dict(sorted(index["cases"].items()))
    golden.INDEX.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    print(
        f"{len(cases)} cases in {time.perf_counter() - t_all:.1f} s; "
        f"{index['total_bytes']} bytes in {golden.CASES_DIR}"
    )
    if nondeterministic:
        print("\nNOT REPRODUCIBLE between two runs of the same code:", file=sys.stderr)
        for name, diff in nondeterministic.items():
            print(f"\n{name}:\n" + "\n".join(diff), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Examples per second at several ``models.max_concurrency`` levels against a real server.

``tersetalk bench concurrency`` starts ``--servers`` processes of
``python -m tersetalk.models.llamacpp_server`` on the embedded model (each on one
thread, its own port, 127.0.0.1 only) and, when there are several, a small
least-busy HTTP proxy in front of them: llama-cpp-python's server runs one request
at a time per process (it has no ``n_parallel``), so a job with several examples in
flight can only be served faster by several processes behind one URL, which is what
vLLM or Ollama do inside one server. Then, per repeat and in a freshly shuffled
order, it runs the same examples through the real runner at every level, each with an
empty call cache (every call reaches the model), and writes one row per level:
wall time, examples per second, the ratio to level 1 from the same repeat (medians
over repeats), and whether the deterministic columns equal level 1's.

This measures this machine: with C cores and S single-threaded servers the ceiling is
about min(C, S) times level 1, less what the client side and the other jobs on the
machine take. It is a benchmark to read, not a timed test.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pandas as pd

log = logging.getLogger("tersetalk.bench")

__all__ = ["LeastBusyProxy", "add_parser", "run_concurrency_bench", "served"]

ALIAS = "smollm2"
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LeastBusyProxy:
    """Forwards every request to the backend with the fewest requests in flight.

    Bodies are streamed through as they arrive (event streams included) and the
    client's connection is closed after each answer, which marks the body's end.
    """

    def __init__(self, backends: list[str]) -> None:
        self.backends = [urlsplit(b) for b in backends]
        self.busy = [0] * len(backends)
        self.served = [0] * len(backends)
        self._lock = threading.Lock()
        self._next = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                proxy.forward(self, b"")

            def do_POST(self) -> None:  # noqa: N802
                proxy.forward(self, self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def _pick(self) -> int:
        with self._lock:
            n = len(self.backends)
            order = [(self._next + k) % n for k in range(n)]  # ties: round robin
            i = min(order, key=lambda j: self.busy[j])
            self._next = (i + 1) % n
            self.busy[i] += 1
            self.served[i] += 1
            return i

    def forward(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        i = self._pick()
        target = self.backends[i]
        try:
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
            headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP_HEADERS}
            headers["Content-Length"] = str(len(body))
            conn.request(h.command, h.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            h.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in _HOP_HEADERS:
                    h.send_header(k, v)
            h.send_header("Connection", "close")
            h.end_headers()
            while chunk := resp.read1(65536):
                h.wfile.write(chunk)
                h.wfile.flush()
            h.close_connection = True
            conn.close()
        finally:
            with self._lock:
                self.busy[i] -= 1

    def start(self) -> LeastBusyProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _wait_up(proc: subprocess.Popen, base: str, logfile: Path, timeout_s: float = 180) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(
                f"llama_cpp.server exited ({proc.returncode}); its log: {logfile}\n"
                + logfile.read_text(errors="replace")[-2000:]
            )
        try:
            if httpx.get(base + "/v1/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"llama_cpp.server did not come up in {timeout_s:.0f}s: {logfile}")
        time.sleep(0.3)


@contextlib.contextmanager
def served(
    n_servers: int = 1,
    *,
    log_dir: Path,
    alias: str = ALIAS,
    threads: int = 1,
    n_ctx: int = 2048,
) -> Iterator[str]:
    """``n_servers`` llama_cpp.server processes on the embedded model behind one URL.

    Yields the OpenAI base URL (``.../v1``): the server's own with one process, the
    proxy's with several. Every process is stopped on exit.
    """
    from tersetalk.models.llamacpp import default_model_path

    procs: list[subprocess.Popen] = []
    proxy: LeastBusyProxy | None = None
    try:
        bases = []
        for k in range(n_servers):
            port = _free_port()
            logfile = Path(log_dir) / f"llamacpp_server_{k}.log"
            cmd = [
                sys.executable, "-m", "tersetalk.models.llamacpp_server",
                "--model", str(default_model_path()), "--model_alias", alias,
                "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
                "--n_threads", str(threads), "--n_threads_batch", str(threads), "--seed", "0",
            ]  # fmt: skip
            with open(logfile, "wb") as fh:
                procs.append(subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT))
            bases.append((procs[-1], f"http://127.0.0.1:{port}", logfile))
        for proc, base, logfile in bases:
            _wait_up(proc, base, logfile)
        if n_servers == 1:
            yield bases[0][1] + "/v1"
        else:
            proxy = LeastBusyProxy([b for _, b, _ in bases]).start()
            yield proxy.url + "/v1"
            log.info("proxy: requests per server %s", proxy.served)
    finally:
        if proxy is not None:
            proxy.stop()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def run_concurrency_bench(
    spec: dict,
    sample: str | Path,
    *,
    levels: list[int],
    servers: int,
    limit: int,
    repeats: int = 1,
    seed: int = 0,
    workdir: Path,
) -> pd.DataFrame:
    """One row per (repeat, level): wall time and examples per second of a real run."""
    from tersetalk.core.records import deterministic_columns
    from tersetalk.pipeline.runner import run

    if 1 not in levels:
        levels = [1, *levels]  # the ratios are to level 1
    rows = []
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(dir=workdir, prefix=".bench-concurrency-") as tmp:
        tmpdir = Path(tmp)
        with served(servers, log_dir=Path(workdir)) as base_url:
            for rep in range(repeats):
                order = list(levels)
                rng.shuffle(order)
                frames = {}
                for level in order:
                    s = json.loads(json.dumps(spec))
                    s["models"].update(backend="openai", model=ALIAS, base_url=base_url,
                                       stream=False, max_concurrency=level)  # fmt: skip
                    # the same path (it is part of spec_hash), emptied: every call is real
                    s["cache_dir"] = str(tmpdir / "cache")
                    shutil.rmtree(tmpdir / "cache", ignore_errors=True)
                    out = tmpdir / f"run-{rep}-{level}.parquet"
                    c0, t0 = time.process_time(), time.perf_counter()
                    df = run(s, sample, out, limit=limit, progress=False, events=False)
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                    frames[level] = df
                    rows.append({"repeat": rep, "position": order.index(level),
                                 "max_concurrency": level, "servers": servers,
                                 "examples": len(df), "errors": int(df["error"].notna().sum()),
                                 "wall_s": wall, "client_cpu_s": cpu,
                                 "examples_per_s": len(df) / wall})  # fmt: skip
                    log.info("repeat %d, max_concurrency %d: %d examples in %.1fs (%.3f/s)",
                             rep, level, len(df), wall, len(df) / wall)  # fmt: skip
                cols = deterministic_columns(frames[1])
                for row in rows[-len(levels) :]:
                    other = frames[row["max_concurrency"]]
                    row["same_as_level_1"] = bool(frames[1][cols].equals(other[cols]))
    df = pd.DataFrame(rows)
    base = df[df["max_concurrency"] == 1].set_index("repeat")["examples_per_s"]
    df["ratio_to_level_1"] = df["examples_per_s"] / df["repeat"].map(base)
    return df


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per level: median examples/s and median of the per-repeat ratios to level 1."""
    g = df.groupby("max_concurrency", sort=True)
    return pd.DataFrame({
        "servers": g["servers"].first(),
        "repeats": g.size(),
        "examples": g["examples"].first(),
        "errors": g["errors"].sum(),
        "median_wall_s": g["wall_s"].median().round(2),
        "median_examples_per_s": g["examples_per_s"].median().round(4),
        "median_ratio_to_level_1": g["ratio_to_level_1"].median().round(3),
        "min_ratio": g["ratio_to_level_1"].min().round(3),
        "max_ratio": g["ratio_to_level_1"].max().round(3),
        "all_same_as_level_1": g["same_as_level_1"].all(),
        "cpus": os.cpu_count(),
    }).reset_index()  # fmt: skip


def plot(summary: pd.DataFrame, path: Path) -> list[Path]:
    """Examples per second at each in-flight level, as a ratio to one in flight; written
    as ``path``'s PNG and PDF through the house's :func:`~tersetalk.core.plotting.save_figure`
    (metadata and layout check)."""
    import matplotlib.pyplot as plt

    from tersetalk.core.plotting import save_figure, theme

    theme()
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.bar(summary["max_concurrency"].astype(str), summary["median_ratio_to_level_1"])
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("models.max_concurrency")
    ax.set_ylabel("examples/s, ratio to 1")
    ax.set_title(f"{int(summary['servers'].iloc[0])} llama_cpp.server, "
                 f"{int(summary['cpus'].iloc[0])} CPUs", fontsize=9)  # fmt: skip
    fig.tight_layout()
    return save_figure(fig, Path(path).with_suffix(""), dpi=120, data=summary)


def add_parser(sub) -> None:
    """``tersetalk bench concurrency`` (registered by :mod:`tersetalk.bench.cli`)."""
    c = sub.add_parser(
        "concurrency",
        help="examples/s at several models.max_concurrency levels on local servers",
        description="Start llama_cpp.server processes on the embedded model (a proxy in "
        "front when several), run the same examples at each max_concurrency level with an "
        "empty call cache, and report examples/s and the ratio to level 1.",
    )
    c.add_argument("--spec-json", required=True, help="the run spec (what `tersetalk run` takes)")
    c.add_argument("--sample", required=True, help="sample Parquet from `tersetalk sample`")
    c.add_argument("--limit", type=int, default=8, help="examples per run (default: 8)")
    c.add_argument("--levels", default="1,2,4", help="max_concurrency levels (default: 1,2,4)")
    c.add_argument("--servers", type=int, default=2, help="server processes (default: 2)")
    c.add_argument("--repeats", type=int, default=1, help="runs per level (default: 1)")
    c.add_argument("--seed", type=int, default=0, help="seed of the level order")
    c.add_argument("--out", required=True, help="result CSV (per-level summary)")
    c.set_defaults(func=_cmd_concurrency)


def _cmd_concurrency(args) -> None:
    from tersetalk.core.io import write_csv_atomic

    from .results import log_environment

    levels = sorted({int(x) for x in str(args.levels).split(",") if x.strip()})
    if not levels or min(levels) < 1 or args.servers < 1 or args.repeats < 1 or args.limit < 1:
        raise SystemExit("tersetalk bench concurrency: --levels, --servers, --repeats and "
                         "--limit must be positive")  # fmt: skip
    log_environment()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    df = run_concurrency_bench(json.loads(args.spec_json), args.sample, levels=levels,
                               servers=args.servers, limit=args.limit, repeats=args.repeats,
                               seed=args.seed, workdir=out.parent)  # fmt: skip
    write_csv_atomic(df, out.with_name(out.stem + "_runs.csv"))
    summary = summarize(df)
    write_csv_atomic(summary, out)
    plot(summary, out.with_suffix(".png"))
    log.info("wrote %s:\n%s", out, summary.to_string(index=False))

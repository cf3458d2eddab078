"""A small results folder for the dashboard's tests, written by the real runner.

Two systems (``freeform`` and ``mediator`` with the deterministic truncating
compressor) run the same two HotpotQA examples through :func:`tersetalk.pipeline.runner.run`
with the scripted double, so the Parquet files have exactly the layout a workflow
run writes; the summary comes from the real metrics code and the figure is a real
PNG. Nothing here is a number anyone reports: it is what the browser displays.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from fastapi.testclient import TestClient

from tersetalk.mediator import parse_mediator_config
from tersetalk.pipeline.config import run_spec, validate_config

REPO = Path(__file__).resolve().parents[1]
#: where the test clients say the dashboard is (it refuses TestClient's "testserver" Host)
LOCAL = "http://127.0.0.1:8765"


class LoopbackClient(TestClient):
    """Starlette's TestClient addressing the app as ``127.0.0.1:8765``, WebSockets too.

    Why: the dashboard answers only requests whose Host names a loopback address
    (DNS rebinding), and TestClient's defaults (``testserver``, and a hard-coded
    ``ws://testserver`` for WebSockets) name none.
    """

    def __init__(self, app, **kwargs) -> None:
        kwargs.setdefault("base_url", LOCAL)
        super().__init__(app, **kwargs)

    def websocket_connect(self, url: str, *args, **kwargs):
        if url.startswith("/"):
            url = LOCAL.replace("http://", "ws://", 1) + url
        return super().websocket_connect(url, *args, **kwargs)


def scripted_answer(messages):
    if messages[0]["content"].startswith("You are the Critic"):
        return "ACCEPT."
    return "Answer: Paris"


def build_results(base_config: dict, root: Path) -> Path:
    """``root/results`` with two systems' run files, ``summary.parquet``, and ``root/figures``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from tersetalk.metrics.summary import run_metrics
    from tersetalk.models import ScriptedClient
    from tersetalk.pipeline.runner import run
    from tersetalk.tasks.loading import load_records, sample

    results, figures = root / "results", root / "figures"
    ev, _ = sample(
        "hotpotqa", load_records("hotpotqa", data_dir=REPO / "data"), n=2, calibration_n=0, seed=7
    )
    sample_path = root / "hotpotqa.parquet"
    ev.to_parquet(sample_path)
    cfg = copy.deepcopy(base_config)
    cfg["cache_dir"] = str(root / "cache")
    cfg["systems"]["mediator"] = {
        "variants": {"truncate": {"budget": 24, "compressor": "truncate", "judge": False}}
    }
    validate_config(cfg)
    frames = []
    for system, variant in (("freeform", "default"), ("mediator", "truncate")):
        spec = run_spec(cfg, "hotpotqa", system, variant)
        out = results / "runs" / "hotpotqa" / system / f"{variant}.parquet"
        df = run(
            spec,
            sample_path,
            out,
            client=ScriptedClient(scripted_answer),
            progress=False,
            events=False,
        )
        frames.append(run_metrics(df))
    pd.concat(frames, ignore_index=True).to_parquet(results / "summary.parquet")
    figures.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.bar(["freeform", "mediator"], [1.0, 0.5])
    ax.set_title("tokens (test figure)")
    fig.savefig(figures / "tokens.png", dpi=60)
    plt.close(fig)
    return results


def offline_live_config():
    """A live-view mediator that needs no model: truncation, rule keys, no judge."""
    return parse_mediator_config(
        {
            "compression": {"compressor": "truncate", "token_budget": 16},
            "semantic_keys": {"extractor": "rule"},
            "judge": {"enabled": False},
        }
    )


LONG_MESSAGE = (
    "Please write a short report on the March sales of stores 12, 17 and 21 by Friday. "
    "It must not include customer names. Store 12 sold 4,310 units and store 21 sold 5,125. "
    "Our goal is to decide where the extra staff go in April."
)


#: the model key the full-size folder's results are under, and a second model with fewer
FULL_MODEL = "smollm2-135m-instruct"
OTHER_MODEL = "qwen2.5-14b"


def default_runs(config: dict) -> list[tuple[str, str, str]]:
    """(task, system, variant) of every run of the default target, as the workflow's
    ``run_targets`` lists them (systems and variants narrowed to the tasks they run on)."""
    from tersetalk.pipeline.config import enabled_systems
    from tersetalk.pipeline.schedule import runs_on, variant_runs_on

    return [
        (task, system, variant)
        for task in config["tasks"]
        for system in enabled_systems(config)
        if runs_on(config, system, task)
        for variant in config["systems"][system]["variants"]
        if variant_runs_on(config, system, variant, task)
    ]


def build_full_results(base_config: dict, root: Path) -> list[tuple[str, str, str]]:
    """``root/results/<FULL_MODEL>/`` in the per-model layout with a run file for each of
    the default target's runs (82 with config/config.yaml), its summary and a figure, and
    ``root/results/<OTHER_MODEL>/`` with two runs; returns the runs.

    The rows are the two real run files :func:`build_results` writes (two HotpotQA
    examples), copied under every (task, system, variant) name: the page is tested at
    full size, and no number from here means anything."""
    import shutil

    import pandas as pd

    seed = root / "seed"
    seed.mkdir(parents=True, exist_ok=True)
    build_results(base_config, seed)
    rows = pd.read_parquet(seed / "results" / "runs" / "hotpotqa" / "freeform" / "default.parquet")
    summary_row = pd.read_parquet(seed / "results" / "summary.parquet").iloc[:1]
    runs = default_runs(base_config)
    for model, chosen in ((FULL_MODEL, runs), (OTHER_MODEL, runs[:2])):
        base = root / "results" / model
        summaries = []
        for task, system, variant in chosen:
            df = rows.assign(task=task, system=system, variant=variant)
            out = base / "runs" / task / system / f"{variant}.parquet"
            out.parent.mkdir(parents=True, exist_ok=True)
            df.to_parquet(out)
            summaries.append(summary_row.assign(task=task, system=system, variant=variant))
        pd.concat(summaries, ignore_index=True).to_parquet(base / "summary.parquet")
        figures = root / "figures" / model
        figures.mkdir(parents=True, exist_ok=True)
        shutil.copy(seed / "figures" / "tokens.png", figures / "tokens.png")
    # the newer model is the default one
    os.utime(root / "results" / FULL_MODEL / "summary.parquet")
    return runs

"""The dashboard server through Starlette's TestClient: endpoints, refused paths,
loopback by default, the port-taken message, event tailing and the live mediator."""

from __future__ import annotations

import json
import os
import socket

import pytest
from dashboard_support import (
    LONG_MESSAGE,
    REPO,
    LoopbackClient,
    build_results,
    offline_live_config,
)

from tersetalk.core.events import RunPublisher
from tersetalk.dashboard.app import DashboardSettings, create_app
from tersetalk.dashboard.live import LiveMediator
from tersetalk.dashboard.results import PathRefused, safe_path


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from tersetalk.pipeline.config import load_config

    root = tmp_path_factory.mktemp("site")
    results = build_results(load_config(REPO / "config" / "config.yaml"), root)
    (root / "secret.txt").write_text("not for the browser")
    os.symlink(root / "secret.txt", results / "leak.txt")
    os.symlink(root, results / "up")
    (results / "notes.txt").write_text("inside")
    return root


def make_app(site, attach=None, **kw):
    settings = DashboardSettings(
        results=site / "results", figures=site / "figures", attach=attach, poll_s=0.05
    )
    return create_app(settings, lambda publish: LiveMediator(offline_live_config(), publish, **kw))


@pytest.fixture
def client(site):
    with LoopbackClient(make_app(site)) as c:
        yield c


def test_page_static_files_and_info(client):
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert 'id="diagram"' in page.text
    for name in ("app.js", "live.js", "results.js", "workflow.js", "util.js", "app.css"):
        assert client.get(f"/static/{name}").status_code == 200, name
    assert client.get("/favicon.ico").status_code == 200
    assert client.get("/api/info").json()["attach"] is None


def test_results_api_gives_each_systems_conversation(client):
    assert client.get("/api/tasks").json() == [{"task": "hotpotqa", "n_runs": 2}]
    runs = client.get("/api/runs").json()
    assert {(r["system"], r["variant"]) for r in runs} == {
        ("freeform", "default"),
        ("mediator", "truncate"),
    }
    got = client.get("/api/examples", params={"task": "hotpotqa"}).json()
    assert got["task"] == "hotpotqa" and got["warnings"] == []
    examples = got["examples"]
    assert len(examples) == 2 and all(e["n_runs"] == 2 for e in examples)
    conv = client.get(
        "/api/conversation", params={"task": "hotpotqa", "example": examples[0]["example_id"]}
    ).json()
    assert [r["system"] for r in conv["runs"]] == ["freeform", "mediator"]
    for r in conv["runs"]:
        assert r["messages"] and all("tokens_cl100k" in m for m in r["messages"])
        assert r["prediction"] == "Paris" and r["gold"] == conv["gold"]
        assert r["tokens_total_cl100k"] == sum(m["tokens_cl100k"] for m in r["messages"])
    missing = client.get("/api/conversation", params={"task": "hotpotqa", "example": "nope"})
    assert missing.status_code == 404


def test_summary_and_figures(client):
    s = client.get("/api/summary").json()
    assert not s["missing"] and "accuracy" in s["columns"] and len(s["rows"]) == 2
    figs = client.get("/api/figures").json()
    assert figs == [{"name": "tokens.png", "url": "/files/figures/tokens.png"}]
    img = client.get(figs[0]["url"])
    assert img.status_code == 200 and img.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert client.get("/files/results/notes.txt").text == "inside"


@pytest.mark.parametrize(
    "url",
    [
        "/files/results/..%2Fsecret.txt",
        "/files/results/%2E%2E/secret.txt",
        "/files/results/runs/..%2F..%2Fsecret.txt",
        "/files/results/%2Fetc%2Fpasswd",
        "/files/results//etc/passwd",
        "/files/figures/..%2Fresults%2Fnotes.txt",
        "/files/results/leak.txt",  # a symlink to a file outside
        "/files/results/up/secret.txt",  # a symlinked folder outside
        "/files/results/..%5Csecret.txt",
    ],
)
def test_files_outside_the_folders_are_refused(client, url):
    res = client.get(url)
    assert res.status_code == 403, (url, res.status_code, res.text)
    assert "not for the browser" not in res.text


def test_only_results_and_figures_are_served(client):
    assert client.get("/files/etc/passwd").status_code == 404
    assert client.get("/files/results/runs").status_code == 404  # a folder is not a file


def test_safe_path_rules(site):
    root = site / "results"
    assert safe_path(root, "notes.txt") == (root / "notes.txt").resolve()
    for bad in [
        "../secret.txt",
        "/etc/passwd",
        "a/../../x",
        "leak.txt",
        "up/secret.txt",
        "",
        "a\\..\\b",
        "nul\x00",
    ]:
        with pytest.raises(PathRefused):
            safe_path(root, bad)


def test_loopback_by_default_and_no_answer_elsewhere(site):
    from tersetalk.cli import build_parser
    from tersetalk.dashboard.serve import ServerThread

    args = build_parser().parse_args(["dashboard"])
    assert args.host == "127.0.0.1"
    server = ServerThread(make_app(site), port=0)  # the defaults the CLI uses
    with server as url:
        assert url.startswith("http://127.0.0.1:")
        with socket.create_connection(("127.0.0.1", server.port), timeout=5):
            pass
        other = _non_loopback_address()
        if other is not None:
            with pytest.raises(OSError):
                socket.create_connection((other, server.port), timeout=5).close()


def _non_loopback_address() -> str | None:
    """This machine's address on its default route, if it has one."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent by a UDP connect
        addr = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if addr.startswith("127.") else addr


def test_a_taken_port_says_so(capsys):
    from tersetalk.cli import main

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        with pytest.raises(SystemExit) as exc:
            main(["dashboard", "--port", str(port)])
    finally:
        holder.close()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"port {port} on 127.0.0.1 is taken" in err and "--port" in err


def _receive_until(ws, predicate, limit=500):
    for _ in range(limit):
        msg = ws.receive_json()
        if predicate(msg):
            return msg
    raise AssertionError("the expected message never came")


def test_websocket_pushes_run_events_from_tailed_files(site, tmp_path):
    attach = tmp_path / "live-results"
    with LoopbackClient(make_app(site, attach=attach)) as c, c.websocket_connect("/ws") as ws:
        snap = ws.receive_json()
        assert snap["type"] == "snapshot" and snap["progress"]["runs"] == []
        assert snap["progress"]["attached"] == str(attach)
        pub = RunPublisher(
            attach / "runs/gsm8k/freeform/default.events.jsonl",
            task="gsm8k",
            system="freeform",
            variant="default",
        )
        pub.run_started(n_examples=4)
        pub.example_started({"example_id": "e1", "position": 0})
        pub.message(
            {
                "turn": 0,
                "sender": "M",
                "receiver": "W",
                "kind": "brief",
                "content": "brief text",
                "tokens_cl100k": 11,
            }
        )
        msg = _receive_until(
            ws, lambda m: m["type"] == "run_event" and m["event"]["event"] == "message"
        )
        assert msg["run"]["key"] == "runs/gsm8k/freeform/default"
        assert msg["run"]["status"] == "running" and msg["run"]["tokens"] == 11
        assert msg["event"]["content"] == "brief text"
        pub.close()
        wf = c.get("/api/progress").json()
        assert wf["runs"][0]["n_examples"] == 4 and wf["recent"][-1]["event"] == "message"


def test_live_message_goes_through_every_stage(client):
    with client.websocket_connect("/ws") as ws:
        snap = ws.receive_json()
        stages = {s["id"]: s["enabled"] for s in snap["live"]["stages"]}
        assert stages == {
            "agent_a": True,
            "compression": True,
            "keys": True,
            "judge": False,
            "agent_b": True,
        }
        res = client.post("/api/live/message", json={"message": LONG_MESSAGE})
        assert res.status_code == 202
        mid = res.json()["message_id"]
        events = []
        result = _receive_until(ws, lambda m: events.append(m) or m["type"] == "pipeline_result")
    kinds = [m["event"]["event"] for m in events if m["type"] == "pipeline"]
    assert kinds[0] == "message_received" and kinds[-1] == "pipeline_complete"
    assert kinds.index("compression_start") < kinds.index("extraction_start")
    assert "compression_pass" in kinds and "stage_text" in kinds
    texts = [
        m["event"]["data"]
        for m in events
        if m["type"] == "pipeline" and m["event"]["event"] == "stage_text"
    ]
    assert any(t["stage"] == "keys" and t["keys"] for t in texts)
    rec = result["result"]
    assert rec["message_id"] == mid and rec["error"] is None
    assert rec["compression"]["final_tokens"] <= 16 < rec["original"]["tokens"]
    assert result["stats"]["messages"] == 1
    assert client.get("/api/live").json()["stats"]["messages"] == 1


@pytest.mark.parametrize(
    "body, code", [({"message": "  "}, 400), ({"text": "x"}, 400), ({"message": "x" * 20_001}, 413)]
)
def test_live_message_validation(client, body, code):
    assert client.post("/api/live/message", json=body).status_code == code


def test_a_client_that_disconnects_does_not_affect_a_run(site):
    with LoopbackClient(make_app(site)) as c:
        with c.websocket_connect("/ws") as gone:
            gone.receive_json()
        with c.websocket_connect("/ws") as ws:
            ws.receive_json()
            c.post("/api/live/message", json={"message": LONG_MESSAGE})
            with c.websocket_connect("/ws") as leaves_mid_run:
                leaves_mid_run.receive_json()
            result = _receive_until(ws, lambda m: m["type"] == "pipeline_result")
        assert result["result"]["error"] is None
        assert c.app.state.hub.n_clients == 0


def test_a_subscriber_that_raises_does_not_affect_a_run():
    calls = []

    def broken(msg):
        calls.append(msg)
        raise RuntimeError("subscriber bug")

    live = LiveMediator(offline_live_config(), broken)
    try:
        live.submit(LONG_MESSAGE)
        live.submit(LONG_MESSAGE)
        live.wait()  # the worker finishes both messages although every publish fails
        assert [r.ok for r in live.results] == [True, True]
        assert calls and all(r.extraction.keys for r in live.results)
    finally:
        live.close()


def test_snapshot_is_json_and_keeps_history(client):
    with client.websocket_connect("/ws") as ws:
        ws.receive_json()
        client.post("/api/live/message", json={"message": LONG_MESSAGE})
        _receive_until(ws, lambda m: m["type"] == "pipeline_result")
    live = client.get("/api/live").json()
    assert live["history"][-1]["delivered"]["text"]
    json.dumps(live)


def test_other_sites_pages_cannot_use_the_dashboard(client):
    """A page from another origin may make the browser call 127.0.0.1: refused."""
    from starlette.websockets import WebSocketDisconnect

    evil = {"Origin": "http://evil.example"}
    res = client.post("/api/live/message", json={"message": LONG_MESSAGE}, headers=evil)
    assert res.status_code == 403
    form = client.post(
        "/api/live/message",
        content=json.dumps({"message": "x"}),
        headers={"Content-Type": "text/plain"},
    )
    assert form.status_code == 415  # a form post needs no CORS preflight: JSON only
    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/ws", headers=evil) as ws:
        ws.receive_json()
    same = {"Origin": "http://127.0.0.1:8765"}
    with client.websocket_connect("/ws", headers=same) as ws:
        assert ws.receive_json()["type"] == "snapshot"
    assert client.post("/api/live/message", json={"message": "hi"}, headers=same).status_code == 202


def test_the_topology_studys_runs_are_browsed_beside_the_main_ones(site, tmp_path):
    import shutil

    from tersetalk.dashboard.results import ResultsIndex

    results = tmp_path / "results"
    shutil.copytree(site / "results" / "runs", results / "runs")
    routed = results / "topology" / "runs" / "hotpotqa" / "topology_tersetalk"
    routed.mkdir(parents=True)
    shutil.copy(results / "runs" / "hotpotqa" / "freeform" / "default.parquet",
                routed / "chain.parquet")  # fmt: skip
    index = ResultsIndex(results, tmp_path / "figures")
    runs = {(r["system"], r["variant"]): r["path"] for r in index.runs()}
    assert runs[("topology_tersetalk", "chain")] == (
        "topology/runs/hotpotqa/topology_tersetalk/chain.parquet"
    )
    assert ("freeform", "default") in runs and index.tasks() == [{"task": "hotpotqa", "n_runs": 3}]
    example = index.examples("hotpotqa")["examples"][0]["example_id"]
    assert len(index.conversation("hotpotqa", example)["runs"]) == 3


def test_results_per_model_with_the_flat_layout_still_read(site, tmp_path):
    """Each model's results under results/<model>/; the newest is the default; an old flat
    folder is one more model, with a note on the migration; an unknown model is a 404."""
    import shutil

    from tersetalk.dashboard.results import LEGACY, ResultsIndex, UnknownModel

    results = tmp_path / "results"
    for model in ("model-a", "model-b"):
        shutil.copytree(site / "results" / "runs", results / model / "runs")
        shutil.copy(site / "results" / "summary.parquet", results / model / "summary.parquet")
    os.utime(results / "model-a" / "summary.parquet", (1e9, 1e9))
    os.utime(results / "model-a" / "runs", (1e9, 1e9))
    (tmp_path / "figures" / "model-a").mkdir(parents=True)
    (tmp_path / "figures" / "model-b").mkdir()
    for model in ("model-a", "model-b"):
        shutil.copy(site / "figures" / "tokens.png", tmp_path / "figures" / model / "tokens.png")
    index = ResultsIndex(results, tmp_path / "figures")
    got = index.models()
    assert [m["model"] for m in got["models"]] == ["model-a", "model-b"]
    assert got["default"] == "model-b" and got["note"] is None
    assert index.runs("model-a")[0]["path"].startswith("model-a/runs/")
    assert index.summary("model-a")["path"] == "model-a/summary.parquet"
    assert [f["name"] for f in index.figure_list("model-a")] == ["model-a/tokens.png"]
    with pytest.raises(UnknownModel):
        index.tasks("../etc")
    shutil.copytree(site / "results" / "runs", results / "runs")  # the old layout beside
    got = index.models()
    assert got["models"][-1]["model"] == LEGACY
    assert "results/<model key>/" in got["note"] and got["default"] == "model-b"
    assert index.runs(LEGACY)[0]["path"].startswith("runs/")
    client = LoopbackClient(create_app(DashboardSettings(results=results, figures=tmp_path)))
    assert client.get("/api/tasks", params={"model": "nope"}).status_code == 404
    assert client.get("/api/summary", params={"model": "model-a"}).json()["rows"]


def test_snakemakes_log_gives_every_job_progress_and_an_estimate(tmp_path):
    from tersetalk.dashboard.snakelog import SnakemakeLog, parse_log

    text = """Building DAG of jobs...
Job stats:
job      count
-----  -------
run          2
score        2
total        4

Select jobs to execute...
[Thu Nov 26 21:17:08 2026]
localrule run:
    output: results/m/runs/hotpotqa/freeform/default.parquet
    jobid: 3
    wildcards: task=hotpotqa, system=freeform, variant=default
[Thu Nov 26 21:17:08 2026]
rule run:
    output: results/m/calibration/runs/hotpotqa/tersetalk/g03.parquet
    jobid: 4
    wildcards: task=hotpotqa, system=tersetalk, point=g03
[Thu Nov 26 21:18:08 2026]
Finished jobid: 3 (Rule: run)
1 of 4 steps (25%) done
[Thu Nov 26 21:18:08 2026]
rule score:
    jobid: 2
[Thu Nov 26 21:18:10 2026]
Error in rule score:
    jobid: 2
"""
    state = parse_log(text, now=None)
    assert (state["done"], state["total"], state["ended"]) == (1, 4, False)
    status = {j["jobid"]: (j["rule"], j["status"]) for j in state["jobs"]}
    assert status == {"3": ("run", "finished"), "4": ("run", "running"), "2": ("score", "failed")}
    assert state["rules"]["score"] == {"planned": 2, "jobs": 1, "finished": 0, "failed": 1}
    assert state["eta_s"] == pytest.approx(state["elapsed_s"] * 3)
    ended = parse_log(text + "Complete log(s): x.snakemake.log\n")
    assert ended["ended"] and ended["eta_s"] is None and ended["elapsed_s"] == 62
    assert {j["status"] for j in ended["jobs"]} == {"finished", "stopped", "failed"}
    folder = tmp_path / ".snakemake" / "log"
    folder.mkdir(parents=True)
    log = SnakemakeLog(tmp_path)
    assert not log.poll() and log.state() is None
    (folder / "2026-11-26T211706.snakemake.log").write_text(text)
    assert log.poll() and not log.poll()
    assert log.state()["log"] == "2026-11-26T211706.snakemake.log"

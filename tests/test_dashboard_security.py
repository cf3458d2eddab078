"""The dashboard's defences: Host allowlist against DNS rebinding, a torn
run file skipped with a warning, no symlink followed out of the results folder,
nosniff and a Content-Security-Policy, HTML/SVG result files as downloads, and
capped text in run events."""

from __future__ import annotations

import http.client
import json
import logging
import os
import re
import shutil

import pytest
from dashboard_support import (
    LONG_MESSAGE,
    REPO,
    LoopbackClient,
    build_results,
    offline_live_config,
)
from starlette.websockets import WebSocketDisconnect

from tersetalk.core.events import MAX_FIELD_CHARS, RunPublisher
from tersetalk.dashboard.app import DashboardSettings, create_app
from tersetalk.dashboard.live import LiveMediator
from tersetalk.dashboard.results import ResultsIndex
from tersetalk.dashboard.tail import EventTailer

STATIC = REPO / "src" / "tersetalk" / "dashboard" / "static"
RUN = "runs/hotpotqa/freeform/default.parquet"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from tersetalk.pipeline.config import load_config

    root = tmp_path_factory.mktemp("security-site")
    build_results(load_config(REPO / "config" / "config.yaml"), root)
    return root


@pytest.fixture
def copy(site, tmp_path):
    """A private copy of the site's results and figures, for tests that damage them."""
    shutil.copytree(site / "results", tmp_path / "results")
    shutil.copytree(site / "figures", tmp_path / "figures")
    return tmp_path


def make_app(root, **settings):
    settings = DashboardSettings(results=root / "results", figures=root / "figures", **settings)
    return create_app(settings, lambda publish: LiveMediator(offline_live_config(), publish))


# -- Host allowlist (DNS rebinding) ----------------------------------------------------


def test_a_rebound_name_is_refused_even_with_a_matching_origin(site):
    """evil.example resolving to 127.0.0.1: same-origin for the browser, refused here."""
    evil = {"Host": "evil.example:8765", "Origin": "http://evil.example:8765"}
    with LoopbackClient(make_app(site)) as c:
        for res in (
            c.get("/api/tasks", headers=evil),
            c.get(f"/files/results/{RUN}", headers=evil),
            c.get("/", headers=evil),
            c.post("/api/live/message", json={"message": LONG_MESSAGE}, headers=evil),
        ):
            assert res.status_code == 421, res.text
            why = res.json()["error"]
            assert "evil.example:8765" in why and "DNS rebinding" in why
            assert "--allow-host" in why and "127.0.0.1:8765" in why
            assert res.headers["x-content-type-options"] == "nosniff"
        assert c.app.state.live.snapshot()["pending"] == 0  # nothing queued to the model
        with pytest.raises(WebSocketDisconnect), c.websocket_connect("/ws", headers=evil) as ws:
            ws.receive_json()


@pytest.mark.parametrize(
    "host, status",
    [
        ("127.0.0.1:8765", 200),
        ("localhost:8765", 200),
        ("LocalHost:8765", 200),
        ("[::1]:8765", 200),
        ("localhost:9999", 421),  # another port: not this server
        ("localhost", 421),  # port 80 implied
        ("localhost.:8765", 421),
        ("127.0.0.2:8765", 421),
        ("evil.example", 421),
        # not a host[:port] at all: a bad request
        ("[::1:8765", 400),
        ("localhost:87x5", 400),
        ("localhost:99999", 400),
        ("", 400),
        # digits Python's isdigit() takes and int() refuses (superscript two; Arabic-Indic)
        ("localhost:\u00b2".encode("latin-1"), 400),
        ("localhost:\u00b2".encode(), 400),
        ("localhost:\u0668\u0667\u0666\u0665".encode(), 400),
    ],
)
def test_only_loopback_names_with_the_serving_port_are_answered(site, host, status):
    with LoopbackClient(make_app(site), raise_server_exceptions=False) as c:
        res = c.get("/api/tasks", headers={"Host": host})
    assert res.status_code == status, (host, res.status_code, res.text)
    if status != 200:
        assert res.json()["error"].startswith("refused:")
        assert res.headers["x-content-type-options"] == "nosniff"


def test_the_bound_address_and_allowed_names_are_answered_but_not_a_wildcard(site):
    with LoopbackClient(make_app(site, host="192.0.2.10", allowed_hosts=("box.lan",))) as c:
        for host in ("192.0.2.10:8765", "box.lan:8765", "BOX.lan:8765", "localhost:8765"):
            assert c.get("/api/tasks", headers={"Host": host}).status_code == 200, host
        assert c.get("/api/tasks", headers={"Host": "other.lan:8765"}).status_code == 421
    with LoopbackClient(make_app(site, host="0.0.0.0")) as c:
        assert c.get("/api/tasks", headers={"Host": "0.0.0.0:8765"}).status_code == 421
        assert c.get("/api/tasks", headers={"Host": "127.0.0.1:8765"}).status_code == 200
    with LoopbackClient(make_app(site, host="::1", port=8765)) as c:
        assert c.get("/api/tasks", headers={"Host": "[::1]:8765"}).status_code == 200


def test_a_real_server_refuses_a_rebound_host(site):
    """Through uvicorn: the port is the socket's own (``--port 0``)."""
    from tersetalk.dashboard.serve import ServerThread

    server = ServerThread(make_app(site), port=0)
    with server:
        for host, code in (
            (f"127.0.0.1:{server.port}", 200),
            (f"localhost:{server.port}", 200),
            (f"evil.example:{server.port}", 421),
            ("127.0.0.1:1", 421),
        ):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            try:
                conn.request("GET", "/api/tasks", headers={"Host": host})
                res = conn.getresponse()
                assert res.status == code, (host, res.status)
                assert res.getheader("x-content-type-options") == "nosniff"
                res.read()
            finally:
                conn.close()


def test_the_cli_passes_allow_host():
    from tersetalk.cli import build_parser

    args = build_parser().parse_args(["dashboard", "--allow-host", "a.lan", "--allow-host", "b"])
    assert args.allow_host == ["a.lan", "b"]
    assert build_parser().parse_args(["dashboard"]).allow_host == []


# -- a torn run file ---------------------------------------------------------------------


def tear(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_torn_run_file_is_skipped_with_a_warning_and_the_others_still_show(copy, caplog):
    broken = copy / "results" / "runs" / "hotpotqa" / "broken" / "default.parquet"
    broken.parent.mkdir()
    shutil.copy(copy / "results" / RUN, broken)
    tear(broken)
    with caplog.at_level(logging.WARNING), LoopbackClient(make_app(copy)) as c:
        got = c.get("/api/examples", params={"task": "hotpotqa"})
        assert got.status_code == 200, got.text
        body = got.json()
        assert len(body["examples"]) == 2 and all(e["n_runs"] == 2 for e in body["examples"])
        [warning] = body["warnings"]
        assert warning["path"] == "runs/hotpotqa/broken/default.parquet"
        assert "unreadable" in warning["message"]
        conv = c.get(
            "/api/conversation",
            params={"task": "hotpotqa", "example": body["examples"][0]["example_id"]},
        ).json()
        assert [r["system"] for r in conv["runs"]] == ["freeform", "mediator"]
        assert conv["warnings"] == [warning]
        c.get("/api/examples", params={"task": "hotpotqa"})  # asked again: logged once
    logged = [r for r in caplog.records if "broken/default.parquet" in r.getMessage()]
    assert len(logged) == 1 and logged[0].levelno == logging.WARNING


def test_a_torn_summary_is_a_warning_not_a_500(copy):
    tear(copy / "results" / "summary.parquet")
    with LoopbackClient(make_app(copy), raise_server_exceptions=False) as c:
        res = c.get("/api/summary")
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["rows"] == [] and body["warnings"][0]["path"] == "summary.parquet"


# -- symlinks out of the results folder ----------------------------------------------------


def test_a_symlinked_folder_outside_results_is_not_followed(copy, tmp_path_factory):
    import pandas as pd

    outside = tmp_path_factory.mktemp("outside")
    df = pd.read_parquet(copy / "results" / RUN)
    df["question"] = "SECRET from outside the results folder"
    (outside / "evil").mkdir()
    df.to_parquet(outside / "evil" / "default.parquet")
    runs = copy / "results" / "runs" / "hotpotqa"
    os.symlink(outside / "evil", runs / "evil")  # a folder link
    os.symlink(outside / "evil" / "default.parquet", runs / "freeform" / "leak.parquet")
    os.symlink(runs / "freeform", runs / "alias")  # a link that stays inside: still browsed

    index = ResultsIndex(copy / "results", copy / "figures")
    paths = {r["path"] for r in index.runs()}
    assert "runs/hotpotqa/evil/default.parquet" not in paths
    assert "runs/hotpotqa/freeform/leak.parquet" not in paths
    assert "runs/hotpotqa/alias/default.parquet" in paths
    with LoopbackClient(make_app(copy)) as c:
        body = c.get("/api/examples", params={"task": "hotpotqa"}).json()
        assert "SECRET" not in json.dumps(body)
        assert {w["path"] for w in body["warnings"]} == {
            "runs/hotpotqa/evil/default.parquet",
            "runs/hotpotqa/freeform/leak.parquet",
            "runs/hotpotqa/alias/leak.parquet",  # the same link, seen through the alias
        }
        assert all("outside the results folder" in w["message"] for w in body["warnings"])
        eid = body["examples"][0]["example_id"]
        conv = c.get("/api/conversation", params={"task": "hotpotqa", "example": eid}).json()
        assert "SECRET" not in json.dumps(conv)
        assert {r["path"].split("/")[2] for r in conv["runs"]} == {"freeform", "mediator", "alias"}


def test_the_tailer_does_not_follow_an_event_file_linked_from_outside(tmp_path, caplog):
    outside = tmp_path / "outside.events.jsonl"
    outside.write_text(json.dumps({"event": "run_started", "task": "SECRET"}) + "\n")
    root = tmp_path / "results" / "runs" / "t" / "s"
    root.mkdir(parents=True)
    os.symlink(outside, root / "v.events.jsonl")
    (root / "w.events.jsonl").write_text(json.dumps({"event": "run_started", "task": "t"}) + "\n")
    with caplog.at_level(logging.WARNING):
        tailer = EventTailer(tmp_path / "results")
        events = tailer.poll()
        tailer.scan()
    assert [ev["task"] for _, ev in events] == ["t"]
    assert [s["key"] for s in tailer.states()] == ["runs/t/s/w"]
    assert sum("leads outside" in r.getMessage() for r in caplog.records) == 1


# -- response headers ------------------------------------------------------------------------


def test_every_response_says_nosniff_and_the_page_has_a_strict_csp(site):
    with LoopbackClient(make_app(site)) as c:
        for url in ("/", "/static/app.js", "/static/app.css", "/api/tasks", "/favicon.ico",
                    f"/files/results/{RUN}", "/files/results/nope", "/api/nope"):  # fmt: skip
            res = c.get(url)
            assert res.headers.get("x-content-type-options") == "nosniff", url
        page = c.get("/")
    csp = page.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert "ws://127.0.0.1:8765" in directives["connect-src"]
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in csp


def test_the_page_needs_no_inline_script_or_style():
    """What the CSP forbids, the page must not use: every script is a file, and the views
    set styles through the CSSOM, never a ``style`` attribute."""
    html = (STATIC / "index.html").read_text()
    assert "<style" not in html and " style=" not in html
    assert not re.search(r" on[a-z]+=", html)
    for script in re.findall(r"<script[^>]*>", html):
        assert " src=" in script, script
    for js in STATIC.glob("*.js"):
        text = js.read_text()
        assert not re.search(r"style: `|setAttribute\(\"style|innerHTML|eval\(", text), js.name


def test_result_files_get_a_sandboxing_csp(site):
    with LoopbackClient(make_app(site)) as c:
        res = c.get(f"/files/results/{RUN}")
    assert res.status_code == 200
    assert "sandbox" in res.headers["content-security-policy"]


@pytest.mark.parametrize(
    "which, name, body",
    [
        ("results", "report.html", "<script>alert(document.domain)</script>"),
        ("results", "deep/x.HTM", "<script>alert(1)</script>"),
        ("figures", "plot.svg", '<svg xmlns="http://www.w3.org/2000/svg"><script>1</script></svg>'),
        ("figures", "data.xml", "<x/>"),
    ],
)
def test_html_and_svg_result_files_are_downloads(copy, which, name, body):
    path = copy / which / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    with LoopbackClient(make_app(copy)) as c:
        res = c.get(f"/files/{which}/{name}")
        png = c.get("/files/figures/tokens.png")
    assert res.status_code == 200 and res.text == body
    disposition = res.headers["content-disposition"]
    assert disposition.startswith("attachment") and path.name in disposition
    assert res.headers["x-content-type-options"] == "nosniff"
    assert "content-disposition" not in png.headers  # images still show inline


# -- event text caps -----------------------------------------------------------------------


def test_event_text_is_capped_with_the_original_length(tmp_path):
    path = tmp_path / "run.events.jsonl"
    pub = RunPublisher(path, task="t", system="s", variant="v")
    huge = "x" * 20_000_000
    pub.example_started({"example_id": "e1"})
    pub.message({"turn": 0, "sender": "W", "receiver": "M", "kind": "reply", "content": huge})
    pub.pipeline({"event": "stage_text", "message_id": "m", "data": {"text": huge, "n": 1}})
    pub.example_finished(
        {"example_id": "e1", "prediction": huge, "gold": "g", "error": None, "n_messages": 1}
    )
    pub.run_finished("failed", error="E" * (MAX_FIELD_CHARS + 1))
    pub.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert max(len(line) for line in lines) < 2 * MAX_FIELD_CHARS
    evs = {e["event"]: e for e in map(json.loads, lines)}
    msg = evs["message"]
    assert msg["truncated"] is True and msg["content_chars"] == 20_000_000
    stage = evs["stage"]
    assert len(stage["data"]["text"]) == MAX_FIELD_CHARS and stage["data"]["n"] == 1
    assert stage["truncated_fields"] == {"data.text": 20_000_000}
    verdict = evs["verdict"]
    assert len(verdict["prediction"]) == MAX_FIELD_CHARS
    assert verdict["truncated_fields"] == {"prediction": 20_000_000}
    assert evs["run_finished"]["truncated_fields"] == {"error": MAX_FIELD_CHARS + 1}
    assert "truncated_fields" not in evs["example_started"]


def test_an_event_too_large_after_the_caps_becomes_a_stub(tmp_path):
    path = tmp_path / "run.events.jsonl"
    pub = RunPublisher(path, task="t", system="s", variant="v")
    keys = [{"type": "k", "value": "v" * 100} for _ in range(20_000)]  # ~2.6 MB of short text
    pub.pipeline({"event": "stage_text", "message_id": "m", "data": {"keys": keys}})
    pub.run_finished("finished")
    pub.close()
    stub, done = map(json.loads, path.read_text(encoding="utf-8").splitlines())
    assert stub["event"] == "stage" and stub["dropped"] is True and stub["bytes"] > 2_000_000
    assert done["event"] == "run_finished"


# -- deeply nested JSON ----------------------------------------------------------------------


def deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [500, 20_000])
def test_a_deeply_nested_events_line_is_skipped_and_the_rest_still_shows(tmp_path, depth):
    """One crafted line among a run's events: counted as unreadable, never a 500 (a
    decodable but deep value used to fail the response; a deeper one, the startup)."""
    root = tmp_path / "results"
    root.mkdir()
    (tmp_path / "figures").mkdir()
    first = json.dumps({"event": "run_started", "t": 1, "task": "t"})
    deep = f'{{"event": "message", "t": 2, "content": {deep_json(depth)}}}'
    last = json.dumps({"event": "run_finished", "t": 3, "status": "finished"})
    (root / "r.events.jsonl").write_text(f"{first}\n{deep}\n{last}\n")
    app = make_app(tmp_path, attach=root)
    with LoopbackClient(app, raise_server_exceptions=False) as c:
        res = c.get("/api/progress")
    assert res.status_code == 200, res.text
    assert [e["event"] for e in res.json()["recent"]] == ["run_started", "run_finished"]
    assert [f.errors for f in app.state.tailer._files.values()] == [1]


def test_a_shallow_nested_event_still_shows(tmp_path):
    root = tmp_path / "results"
    root.mkdir()
    (tmp_path / "figures").mkdir()
    ev = {"event": "message", "t": 1, "content": json.loads(deep_json(90))}
    (root / "r.events.jsonl").write_text(json.dumps(ev) + "\n")
    with LoopbackClient(make_app(tmp_path, attach=root)) as c:
        res = c.get("/api/progress")
    assert res.status_code == 200 and res.json()["recent"][0]["content"] == ev["content"]


def test_a_deeply_nested_live_message_body_is_a_400(site):
    body = '{"message": ' + deep_json(20_000) + "}"
    with LoopbackClient(make_app(site), raise_server_exceptions=False) as c:
        res = c.post(
            "/api/live/message", content=body, headers={"content-type": "application/json"}
        )
        assert res.status_code == 400, res.text
        assert "nested deeper than 100" in res.json()["error"]
        assert c.app.state.live.snapshot()["pending"] == 0

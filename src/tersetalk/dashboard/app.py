"""The dashboard's web application: JSON endpoints, files, one WebSocket, the page.

One FastAPI app serves three views from ``static/`` (plain HTML, CSS and ES
modules shipped in the package: no build step, nothing fetched from the
internet):

- live pipeline: ``POST /api/live/message`` queues a message for the mediator
  (:mod:`.live`); its stage events come back over ``/ws``;
- workflow: with ``attach``, a background task tails the runs' event files
  (:mod:`.tail`) and Snakemake's own log of every job (:mod:`.snakelog`, under the
  workflow folder: ``workdir``, else the attached folder's parent) and pushes what is
  new over ``/ws``;
- results: ``/api/models``, and ``/api/tasks``, ``/api/examples``,
  ``/api/conversation``, ``/api/summary``, ``/api/figures`` (each of one ``model``,
  the default one when not named) read the workflow's outputs
  (:mod:`.results`); ``/files/{results|figures}/<path>`` serves a file from
  inside those two folders and nowhere else (HTML, SVG and XML files as downloads).

Every request must name this server in its ``Host`` header, and every response
carries ``nosniff`` (the page also a Content-Security-Policy): see :mod:`.guard`.

Every WebSocket client gets a snapshot on connect, then live messages from the
:class:`~.hub.Hub`; a client that disconnects or breaks is dropped without
touching anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, HTTPException, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from tersetalk.core.io import InputFileError, load_json_text
from tersetalk.dashboard.guard import HostGuard, allowed_names, download_only
from tersetalk.dashboard.hub import Hub
from tersetalk.dashboard.live import LiveMediator, Publish, default_live_config
from tersetalk.dashboard.results import PathRefused, ResultsIndex, UnknownModel, safe_path
from tersetalk.dashboard.snakelog import SnakemakeLog
from tersetalk.dashboard.tail import EventTailer

__all__ = ["DashboardSettings", "create_app"]

log = logging.getLogger(__name__)

#: longest message the live box accepts (characters); the mediator is for messages, not books
MAX_MESSAGE_CHARS = 20_000


@dataclass
class DashboardSettings:
    """What the app serves, and under which names.

    ``host`` is the address the server was bound to (a wildcard such as ``0.0.0.0``
    names no host); requests must name a loopback host, that address or one of
    ``allowed_hosts``, with ``port`` (None: the port the request came in on).
    """

    results: Path = Path("results")
    figures: Path = Path("figures")
    attach: Path | None = None
    poll_s: float = 0.5
    recent_events: int = 200
    extra: dict[str, Any] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int | None = None
    allowed_hosts: tuple[str, ...] = ()
    #: the workflow folder (its .snakemake/log and config/config.yaml); None: the
    #: attached folder's parent
    workdir: Path | None = None

    def workflow_dir(self) -> Path | None:
        if self.workdir is not None:
            return Path(self.workdir)
        return Path(self.attach).resolve().parent if self.attach is not None else None


def _static_dir() -> Path:
    return Path(str(resources.files("tersetalk.dashboard") / "static"))


async def _follow(
    tailer: EventTailer, hub: Hub, recent: deque, poll_s: float, jobs: SnakemakeLog | None
) -> None:
    """Poll the event files (and Snakemake's log) forever; a bad poll is logged and the
    next one tried."""
    while True:
        try:
            for state, ev in await asyncio.to_thread(tailer.poll):
                recent.append({**ev, "key": state.key})
                hub.broadcast({"type": "run_event", "run": state.as_dict(), "event": ev})
            if jobs is not None and await asyncio.to_thread(jobs.poll):
                hub.broadcast({"type": "jobs", "jobs": jobs.state()})
        except Exception:  # noqa: BLE001 - the dashboard outlives one unreadable poll
            log.exception("event tailing failed; trying again")
        await asyncio.sleep(poll_s)


def _study_labels(workdir: Path | None) -> dict[str, Any]:
    """From the workflow's config/config.yaml: ``calibration`` (system -> grid point ->
    settings) and ``sensitivity`` (the results keys of the sensitivity study's models);
    empty when it cannot be read (the points are then named without their settings)."""
    empty: dict[str, Any] = {"calibration": {}, "sensitivity": []}
    if workdir is None or not (workdir / "config" / "config.yaml").is_file():
        return empty
    try:
        from tersetalk.pipeline.config import calibration_points, load_config, sensitivity_models

        cfg = load_config(workdir / "config" / "config.yaml")
        points = {system: calibration_points(cfg, system) for system in cfg.get("calibration", {})}
    except Exception:  # noqa: BLE001 - labels are a nicety; a broken config must not stop us
        log.warning("dashboard: no calibration settings from %s", workdir, exc_info=True)
        return empty
    try:
        keys = sorted(str(m["key"]) for m in sensitivity_models(cfg).values())
    except Exception:  # noqa: BLE001 - a sensitivity model file that is absent here
        keys = []
    return {"calibration": points, "sensitivity": keys}


def create_app(
    settings: DashboardSettings, make_live: Callable[[Publish], LiveMediator] | None = None
) -> FastAPI:
    """The app. ``make_live(publish)`` builds the live view's mediator around the hub's
    thread-safe publish (None: the `mediator demo` settings on the embedded model)."""
    hub = Hub()
    index = ResultsIndex(settings.results, settings.figures)
    tailer = EventTailer(settings.attach) if settings.attach is not None else None
    workdir = settings.workflow_dir()
    jobs = SnakemakeLog(workdir) if tailer is not None and workdir is not None else None
    labels = _study_labels(workdir) if tailer is not None else _study_labels(None)
    recent: deque = deque(maxlen=settings.recent_events)
    if make_live is None:
        live = LiveMediator(default_live_config(), hub.threadsafe)
    else:
        live = make_live(hub.threadsafe)
    served = _Served(settings, hub, index, tailer, jobs, labels, recent, live)

    app = FastAPI(
        title="tersetalk dashboard", lifespan=_lifespan(served), docs_url=None, redoc_url=None
    )
    app.state.hub, app.state.live, app.state.tailer, app.state.index = hub, live, tailer, index
    app.add_middleware(
        HostGuard,
        names=allowed_names(settings.host, settings.allowed_hosts),
        port=settings.port,
    )
    static = _static_dir()
    app.mount("/static", StaticFiles(directory=static), name="static")
    # registered in this order: the order of the routes in the app and its schema
    _add_page_routes(app, static, settings)
    _add_live_routes(app, served)
    _add_results_routes(app, served)
    _add_file_route(app, settings)
    _add_error_handlers(app)
    _add_websocket(app, served)
    return app


@dataclass
class _Served:
    """What the routes and the app's lifespan share: the settings, the hub, the results
    index, the workflow's tailers and what they have seen, and the live mediator."""

    settings: DashboardSettings
    hub: Hub
    index: ResultsIndex
    tailer: EventTailer | None
    jobs: SnakemakeLog | None
    labels: dict[str, Any]
    recent: deque
    live: LiveMediator

    def workflow_snapshot(self) -> dict[str, Any]:
        """The workflow view's state: the attached runs, recent events, Snakemake's jobs
        and the study's labels."""
        return {
            "attached": str(self.settings.attach) if self.settings.attach is not None else None,
            "runs": self.tailer.states() if self.tailer is not None else [],
            "recent": sorted(self.recent, key=lambda e: e.get("t") or 0),
            "jobs": self.jobs.state() if self.jobs is not None else None,
            "calibration": self.labels["calibration"],
            "sensitivity": self.labels["sensitivity"],
        }


def _lifespan(served: _Served) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager]:
    """The app's lifespan: bind the hub to the server's loop, read what the attached
    folder already holds, follow it in a background task, and on shutdown stop the task
    and close the live mediator."""
    tailer, jobs, recent = served.tailer, served.jobs, served.recent

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        served.hub.bind(asyncio.get_running_loop())
        task = None
        if tailer is not None:
            # what is already on disk is the starting state, not news for the browser
            for state, ev in await asyncio.to_thread(tailer.poll):
                recent.append({**ev, "key": state.key})
            if jobs is not None:
                await asyncio.to_thread(jobs.poll)
            task = asyncio.create_task(
                _follow(tailer, served.hub, recent, served.settings.poll_s, jobs)
            )
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            served.live.close()

    return lifespan


def _add_page_routes(app: FastAPI, static: Path, settings: DashboardSettings) -> None:
    """The page, its icon, and ``/api/info`` (the version and what is served)."""

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(static / "index.html", media_type="text/html")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        return FileResponse(static / "favicon.svg", media_type="image/svg+xml")

    @app.get("/api/info")
    def info() -> dict[str, Any]:
        from tersetalk import __version__

        return {
            "version": __version__,
            "results": str(settings.results),
            "figures": str(settings.figures),
            "attach": str(settings.attach) if settings.attach is not None else None,
            **settings.extra,
        }


def _add_live_routes(app: FastAPI, served: _Served) -> None:
    """The live view: the mediator's state, and a message to queue for it."""
    live = served.live

    @app.get("/api/live")
    def live_state() -> dict[str, Any]:
        return live.snapshot()

    @app.post("/api/live/message", status_code=202)
    async def live_message(request: Request) -> dict[str, Any]:
        return {"message_id": live.submit(await _posted_message(request)), "queued": True}


async def _posted_message(request: Request) -> str:
    """The message of a live POST, or the HTTP error that says what is wrong with the
    request: another origin (403), not JSON (415), a bad body (400), no message (400),
    one too long (413)."""
    if not _same_origin(request.headers):
        raise HTTPException(403, "cross-origin requests are refused")
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise HTTPException(415, 'send JSON (Content-Type: application/json): {"message": ...}')
    try:  # bounded: a crafted deep body is a 400, not a RecursionError's 500
        body = load_json_text(await request.body(), "the request body")
    except InputFileError as exc:
        raise HTTPException(400, f'send JSON: {{"message": "..."}}; {exc}') from None
    except ValueError:
        raise HTTPException(400, 'send JSON: {"message": "..."}') from None
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message.strip():
        raise HTTPException(400, "the message is empty: write what Agent A says")
    if len(message) > MAX_MESSAGE_CHARS:
        raise HTTPException(413, f"the message is over {MAX_MESSAGE_CHARS} characters")
    return message


def _add_results_routes(app: FastAPI, served: _Served) -> None:
    """The workflow's progress, and its results read through the results index (each
    of one ``model``, the default one when not named)."""
    index = served.index

    @app.get("/api/progress")
    def workflow() -> dict[str, Any]:
        return served.workflow_snapshot()

    @app.get("/api/models")
    def models() -> dict[str, Any]:
        return index.models()

    @app.get("/api/runs")
    def runs(model: str | None = None) -> list[dict[str, Any]]:
        return index.runs(model)

    @app.get("/api/tasks")
    def tasks(model: str | None = None) -> list[dict[str, Any]]:
        return index.tasks(model)

    @app.get("/api/examples")
    def examples(task: str, model: str | None = None) -> dict[str, Any]:
        return index.examples(task, model)

    @app.get("/api/conversation")
    def conversation(task: str, example: str, model: str | None = None) -> dict[str, Any]:
        conv = index.conversation(task, example, model)
        if not conv["runs"]:
            skipped = "; ".join(f"{w['path']}: {w['message']}" for w in conv["warnings"])
            raise HTTPException(
                404,
                f"no run of task {task!r} has example {example!r}"
                + (f" (files skipped: {skipped})" if skipped else ""),
            )
        return conv

    @app.get("/api/summary")
    def summary(model: str | None = None) -> dict[str, Any]:
        return index.summary(model)

    @app.get("/api/figures")
    def figures(model: str | None = None) -> list[dict[str, str]]:
        return index.figure_list(model)


def _add_file_route(app: FastAPI, settings: DashboardSettings) -> None:
    """``/files/{results|figures}/<path>``: a file from inside those two folders and
    nowhere else, HTML, SVG and XML files as downloads."""

    @app.get("/files/{which}/{path:path}")
    def files(which: str, path: str) -> FileResponse:
        roots = {"results": settings.results, "figures": settings.figures}
        if which not in roots:
            raise HTTPException(404, "files are served from results/ and figures/ only")
        try:
            target = safe_path(roots[which], path)
        except PathRefused as exc:
            raise HTTPException(403, str(exc)) from None
        if not target.is_file():
            raise HTTPException(404, f"{which}/{path} is not a file")
        if download_only(target.name):  # model-made HTML/SVG must not run as this origin
            return FileResponse(target, filename=target.name, content_disposition_type="attachment")
        return FileResponse(target)


def _add_error_handlers(app: FastAPI) -> None:
    """Errors as JSON ``{"error": ...}``: an unknown model is a 404, an HTTP error keeps
    its status."""

    @app.exception_handler(UnknownModel)
    async def unknown_model(request: Request, exc: UnknownModel) -> JSONResponse:
        return JSONResponse({"error": str(exc.args[0])}, status_code=404)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)


def _add_websocket(app: FastAPI, served: _Served) -> None:
    """``/ws``: a snapshot on connect (and on a resync), then the hub's messages until
    the client goes away; a client from another site's page is refused."""
    hub, live = served.hub, served.live

    def snapshot() -> dict[str, Any]:
        return {"type": "snapshot", "live": live.snapshot(), "progress": served.workflow_snapshot()}

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        if not _same_origin(websocket.headers):
            await websocket.close(code=1008)  # policy violation: another site's page
            return
        await websocket.accept()
        q = hub.subscribe()
        receiver: asyncio.Task | None = None
        try:
            await websocket.send_text(json.dumps(snapshot(), default=str))
            receiver = asyncio.create_task(_drain(websocket))
            while True:
                getter = asyncio.create_task(q.get())
                done, _ = await asyncio.wait(
                    {getter, receiver}, return_when=asyncio.FIRST_COMPLETED
                )
                if receiver in done:  # the browser went away
                    getter.cancel()
                    break
                msg = getter.result()
                if msg.get("type") == "resync":
                    msg = snapshot()
                await websocket.send_text(json.dumps(msg, default=str))
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass  # a client that vanished mid-send: nothing else depends on it
        finally:
            hub.unsubscribe(q)
            if receiver is not None:
                receiver.cancel()


def _same_origin(headers) -> bool:
    """No ``Origin`` (curl, scripts) or one naming this very host and port.

    Why: the server runs on the user's machine, and any web page the user opens can
    make the browser send a request to 127.0.0.1. Without this check such a page
    could run messages through the user's model or read the run events over the
    WebSocket (browsers do not apply CORS to WebSockets, and a form POST needs no
    preflight); JSON-only POSTs and this check stop both.
    """
    origin = headers.get("origin")
    if origin is None:
        return True
    netloc = urlsplit(origin).netloc
    return bool(netloc) and netloc == headers.get("host")


async def _drain(websocket: WebSocket) -> None:
    """Read (and ignore) what the browser sends, until it disconnects."""
    try:
        while True:
            await websocket.receive_text()
    except (WebSocketDisconnect, RuntimeError):
        return

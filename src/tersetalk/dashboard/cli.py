"""``tersetalk dashboard``: serve the live views and the results browser on loopback.

Loopback by default because the page can run the mediator on the configured
model and serves files from the results folder: exposing that is the user's
explicit choice (``--host 0.0.0.0``), never a default. Requests must name the
server by a loopback name, the ``--host`` address or an ``--allow-host`` name
(DNS rebinding: see :mod:`tersetalk.dashboard.guard`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def _live_models(config_paths: list[str]) -> tuple[dict, int]:
    """The ``models`` section and seed of the workflow config (the "configured model"):
    the ``--config`` files layered over config/config.yaml, as every subcommand reads them."""
    from tersetalk.core.cliargs import DEFAULT_CONFIG
    from tersetalk.pipeline.config import load_workflow_config

    if not config_paths and not Path(DEFAULT_CONFIG).is_file():
        # outside a workflow folder: the embedded model, said where it is decided
        log.warning(
            "no workflow config here (%s does not exist): the live mediator uses the "
            "embedded model and seed 0; give --config FILE, or start from the workflow's "
            "folder, to use the workflow's model",
            Path.cwd() / DEFAULT_CONFIG,
        )
        return {"backend": "llamacpp"}, 0
    cfg = load_workflow_config(config_paths)
    return dict(cfg["models"]), int(cfg.get("seed", 0))


def _cmd_dashboard(args: argparse.Namespace) -> None:
    from tersetalk.dashboard.serve import PortTakenError, bind_socket, url_for

    try:  # first, so a taken port fails in a second without loading anything
        sock = bind_socket(args.host, args.port)
    except PortTakenError as exc:
        print(f"tersetalk dashboard: error: {exc.strerror}", file=sys.stderr)
        raise SystemExit(2) from None

    import uvicorn

    from tersetalk.dashboard.app import DashboardSettings, create_app
    from tersetalk.dashboard.guard import WILDCARDS
    from tersetalk.dashboard.live import LiveMediator, default_live_config

    results = Path(args.results)
    attach = None if args.attach is None else Path(args.attach or args.results)
    if args.mediator_config:
        from tersetalk.mediator import load_mediator_file

        mediator_cfg = load_mediator_file(args.mediator_config).mediator
    else:
        mediator_cfg = default_live_config()
    models, seed = _live_models(args.config)
    port = sock.getsockname()[1]
    settings = DashboardSettings(
        results=results,
        figures=Path(args.figures),
        attach=attach,
        extra={"mediator_config": args.mediator_config or "default"},
        host=args.host,
        port=port,
        allowed_hosts=tuple(args.allow_host),
    )
    app = create_app(
        settings, lambda publish: LiveMediator(mediator_cfg, publish, models=models, seed=seed)
    )
    url = url_for(args.host, port)
    print(
        f"tersetalk dashboard: {url}  (results {results}/, figures {args.figures}/"
        + (f", following runs under {attach}/" if attach else "")
        + "; Ctrl-C stops)",
        flush=True,
    )
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning(
            "listening on %s: anyone who reaches this address can read your results and "
            "run the mediator on your model",
            args.host,
        )
    if args.host in WILDCARDS and not args.allow_host:
        print(
            f"tersetalk dashboard: {args.host} is every interface, but requests must name "
            "this machine as localhost or 127.0.0.1; to use it by another name or address, "
            "add --allow-host NAME",
            file=sys.stderr,
            flush=True,
        )
    config = uvicorn.Config(app, log_level=args.server_log_level, ws="websockets-sansio")
    uvicorn.Server(config).run(sockets=[sock])


def add_commands(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser(
        "dashboard",
        help="web dashboard: live mediator pipeline, live workflow runs, results browser",
        description="Serve the dashboard on loopback and print its URL. Live pipeline: send a "
        "message through the mediator and watch every stage. Workflow (--attach): follow the "
        "runs of a `snakemake` in progress. Results: each system's conversation per example, "
        "the summary table, the figures.",
    )
    d.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default: {DEFAULT_HOST}, this machine only)",
    )
    d.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port (default: {DEFAULT_PORT}; 0: any free port)",
    )
    d.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests that name this server NAME (a hostname or address, "
        "repeatable); by default only localhost, 127.0.0.1, [::1] and --host are answered, "
        "which stops DNS-rebinding pages",
    )
    d.add_argument("--results", default="results", help="results folder (default: results)")
    d.add_argument("--figures", default="figures", help="figures folder (default: figures)")
    d.add_argument(
        "--attach",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help="follow the progress events of runs under DIR (default: the results "
        "folder), e.g. while `snakemake --cores all` runs",
    )
    d.add_argument(
        "--mediator-config",
        help="mediator YAML for the live view (config/mediator.example.yaml's "
        "layout; default: the `mediator demo` settings, judge on)",
    )
    from tersetalk.core.cliargs import add_config_option

    add_config_option(
        d, "; the live mediator uses its models section (no config at all: the embedded model)"
    )
    d.add_argument(
        "--server-log-level",
        default="warning",
        choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn's log level (default: warning)",
    )
    d.set_defaults(func=_cmd_dashboard)

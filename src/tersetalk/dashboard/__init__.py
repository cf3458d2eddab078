"""``tersetalk dashboard``: the live pipeline and workflow view, and the results browser.

Kept import-light on purpose: the runner, the dialogue engine and the mediator
import :mod:`tersetalk.dashboard.publish` on every run, so this package's
``__init__`` must not pull in the web server (FastAPI, uvicorn) or pandas.
The server lives in :mod:`tersetalk.dashboard.app`, started by
:mod:`tersetalk.dashboard.cli`.
"""

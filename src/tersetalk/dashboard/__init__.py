"""``tersetalk dashboard``: the live pipeline and workflow view, and the results browser.

The run events it shows are written by the core module :mod:`tersetalk.core.events`
(the runner, the dialogue engine and the mediator publish through it); this
package only reads them. Kept import-light all the same: ``__init__`` must not
pull in the web server (FastAPI, uvicorn) or pandas.
The server lives in :mod:`tersetalk.dashboard.app`, started by
:mod:`tersetalk.dashboard.cli`.
"""

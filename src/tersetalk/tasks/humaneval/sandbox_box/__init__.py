"""The programs that run inside a sandbox (standard library only; see ``../sandbox.py``).

They are copied into each sandbox as files, never imported by the workflow, and set
no limits of their own (the host sets the rlimits before exec): ``wire``
(plain data across the boundary), ``candidate`` (loads model-written code and answers
calls) and ``judge`` (runs the dataset's trusted tests against calls to the candidate).
"""

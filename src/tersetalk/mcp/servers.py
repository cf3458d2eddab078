"""The real downstream MCP servers of the experiment, and what they serve.

Each server runs from a virtual environment of its own, as an MCP client launches it
(``uvx mcp-server-sqlite``): ``mcp-server-sqlite`` 2025.4.25 crashes on the 2.x SDK
and needs ``mcp<2``, ``mcp-server-git`` needs ``mcp>=2.3``, so they cannot share the
project's environment. The pins live in requirement files (``envs/mcp-server-*.txt``,
every package at an exact version), which the caller passes in: the library does not
know where a checkout keeps them.

An environment is built once (``python -m venv`` + ``pip install -r``) in a temporary
folder beside its destination and renamed into place, with a stamp naming the
requirements' hash; a destination whose stamp matches is reused as is. Console
scripts keep the path they were installed at, and a renamed venv would break their
shebangs, so servers are launched as ``<venv>/bin/python -m <module>`` (or ``-c``
for a package without ``__main__``), which only needs the venv's interpreter.

The data: a SQLite database built from shipped data (HotpotQA questions and the
tool-response corpus's index, ~120 rows x 7 columns per table, so the sqlite
server's ``str(list_of_dicts)`` results are large), and a throwaway git repository
with a few commits at fixed dates and a fixed author, so its hashes (and every
token count of the git server's answers) are the same on every machine.
"""

from __future__ import annotations

import functools
import gzip
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tersetalk.core.io import exclusive, file_sha256, write_atomic

log = logging.getLogger(__name__)

STAMP = "tersetalk-env.json"


class ServerEnvError(RuntimeError):
    """A server environment could not be built or is not there."""


@dataclass(frozen=True)
class ServerSpec:
    """One downstream server: its package, how to start it, what it serves."""

    name: str  # sqlite | git
    package: str  # the PyPI distribution
    launch: tuple[str, ...]  # interpreter arguments that start it
    target_option: str  # the option naming what it serves (--db-path, --repository)


SERVERS: dict[str, ServerSpec] = {
    # no __main__ module: call its console script's function
    "sqlite": ServerSpec(
        "sqlite",
        "mcp-server-sqlite",
        ("-c", "import sys; from mcp_server_sqlite import main; sys.exit(main())"),
        "--db-path",
    ),
    "git": ServerSpec("git", "mcp-server-git", ("-m", "mcp_server_git"), "--repository"),
}

#: Fixed identity and dates for everything committed in the throwaway repository,
#: by git itself or by the git server (GitPython reads the same variables).
GIT_ENV = {
    "GIT_AUTHOR_NAME": "TerseTalk Experiment",
    "GIT_AUTHOR_EMAIL": "experiment@tersetalk.invalid",
    "GIT_COMMITTER_NAME": "TerseTalk Experiment",
    "GIT_COMMITTER_EMAIL": "experiment@tersetalk.invalid",
    "GIT_AUTHOR_DATE": "1767268800 +0000",  # 2026-01-01 12:00 UTC, git's own format
    "GIT_COMMITTER_DATE": "1767268800 +0000",
}


def server_spec(name: str) -> ServerSpec:
    try:
        return SERVERS[name]
    except KeyError:
        raise ServerEnvError(
            f"unknown MCP server {name!r}; known: {', '.join(sorted(SERVERS))}"
        ) from None


def _python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def read_stamp(env_dir: str | Path) -> dict | None:
    """The stamp of a built environment, or None if there is none (or it is unreadable)."""
    path = Path(env_dir) / STAMP
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def build_env(
    server: str,
    requirements: str | Path,
    dest: str | Path,
    *,
    python: str = sys.executable,
) -> dict:
    """Build (or reuse) the server's venv at ``dest``; returns its stamp.

    Idempotent: a ``dest`` whose stamp names the same requirements hash and server is
    kept. Atomic: the venv is built in a temporary folder beside ``dest`` and renamed
    into place, so an interrupted build never leaves a half-installed ``dest``.
    """
    spec = server_spec(server)
    requirements, dest = Path(requirements), Path(dest)
    if not requirements.is_file():
        raise ServerEnvError(f"requirements file {requirements} does not exist")
    digest = file_sha256(requirements)
    # one builder at a time per dest: a second waits, then reuses what the first built
    with exclusive(dest.parent / f".{dest.name}.lock"):
        return _build_env(spec, requirements, digest, dest, python)


def _build_env(spec: ServerSpec, requirements: Path, digest: str, dest: Path,
               python: str) -> dict:  # fmt: skip
    stamp = read_stamp(dest)
    if stamp and stamp.get("requirements_sha256") == digest and _python(dest).exists():
        log.info("%s: reusing %s (requirements %s)", spec.package, dest, digest[:12])
        return stamp
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        log.info("%s: building a venv from %s in %s", spec.package, requirements, tmp)
        subprocess.run([python, "-m", "venv", str(tmp)], check=True)
        cmd = [str(_python(tmp)), "-m", "pip", "install", "--no-input", "--quiet",
               "--disable-pip-version-check", "-r", str(requirements)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ServerEnvError(
                f"pip could not install {requirements} for {spec.package} "
                f"(exit {proc.returncode}):\n{proc.stderr[-3000:]}"
            )
        version = subprocess.run(
            [str(_python(tmp)), "-c", "import sys; from importlib.metadata import version; "
             f"print(version({spec.package!r}), version('mcp'))"],
            check=True, capture_output=True, text=True,
        ).stdout.split()  # fmt: skip
        stamp = {"server": spec.name, "package": spec.package, "version": version[0],
                 "mcp_version": version[1], "requirements": str(requirements),
                 "requirements_sha256": digest}  # fmt: skip
        (tmp / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
        if dest.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
            os.replace(dest, old / "env")
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("%s %s (mcp %s) ready in %s", spec.package, stamp["version"], stamp["mcp_version"],
             dest)  # fmt: skip
    return stamp


# ---- servers written for Node, from npm -------------------------------------------------


@dataclass(frozen=True)
class NpmServerSpec:
    """A reference server from npm, installed into a folder of its own and started with
    ``node`` on its entry script (what ``npx`` would run, without npx's network look-up)."""

    name: str  # filesystem | memory | everything
    package: str  # the npm package
    version: str  # the exact version installed
    args: tuple[str, ...] = ()  # arguments before the target
    #: how the target reaches it: "arg" (appended), "env:NAME" (a variable), "" (none)
    target: str = ""


_REF = "@modelcontextprotocol/server-"
NPM_SERVERS: dict[str, NpmServerSpec] = {
    "filesystem": NpmServerSpec("filesystem", _REF + "filesystem", "2026.8.31", target="arg"),
    "memory": NpmServerSpec("memory", _REF + "memory", "2026.8.31", target="env:MEMORY_FILE_PATH"),
    "everything": NpmServerSpec("everything", _REF + "everything", "2026.8.31", args=("stdio",)),
}

#: every server the experiment knows: Python ones from their venvs, Node ones from npm
ALL_SERVERS = (*SERVERS, *NPM_SERVERS)


def npm_spec(name: str) -> NpmServerSpec:
    try:
        return NPM_SERVERS[name]
    except KeyError:
        raise ServerEnvError(
            f"unknown npm MCP server {name!r}; known: {', '.join(sorted(NPM_SERVERS))}"
        ) from None


def _npm_entry(env_dir: Path, spec: NpmServerSpec) -> Path:
    """The entry script the package's ``bin`` names (what its command runs)."""
    manifest = env_dir / "node_modules" / spec.package / "package.json"
    bins = json.loads(manifest.read_text(encoding="utf-8")).get("bin")
    entry = next(iter(bins.values())) if isinstance(bins, dict) else bins
    if not isinstance(entry, str):
        raise ServerEnvError(f"{manifest} names no entry script under 'bin'")
    return manifest.parent / entry


def build_npm_env(server: str, dest: str | Path) -> dict:
    """Install (or reuse) the server's npm package into ``dest`` with ``npm install
    --prefix`` (exact version); returns its stamp. Atomic and idempotent as
    :func:`build_env`: built beside ``dest`` and renamed into place."""
    spec = npm_spec(server)
    dest = Path(dest)
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        raise ServerEnvError(f"{spec.package} needs Node.js and npm on PATH (Debian: apt-get "
                             "install nodejs npm; .ci/install-node does this)")  # fmt: skip
    dest.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(dest.parent / f".{dest.name}.lock"):
        stamp = read_stamp(dest)
        if stamp and stamp.get("version") == spec.version and stamp.get("package") == spec.package:
            log.info("%s: reusing %s", spec.package, dest)
            return stamp
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
        try:
            cmd = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(tmp),
                   f"{spec.package}@{spec.version}"]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise ServerEnvError(f"npm could not install {spec.package}@{spec.version} "
                                     f"(exit {proc.returncode}):\n"
                                     f"{proc.stderr[-3000:]}")  # fmt: skip
            entry = _npm_entry(tmp, spec)
            node_version = subprocess.run([node, "--version"], check=True, capture_output=True,
                                          text=True).stdout.strip()  # fmt: skip
            stamp = {"server": spec.name, "package": spec.package, "version": spec.version,
                     "node_version": node_version,
                     "entry": str(entry.relative_to(tmp))}  # fmt: skip
            (tmp / STAMP).write_text(json.dumps(stamp, indent=2) + "\n", encoding="utf-8")
            if dest.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
                os.replace(dest, old / "env")
                shutil.rmtree(old, ignore_errors=True)
            os.replace(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    log.info("%s %s (node %s) ready in %s", spec.package, spec.version, node_version, dest)
    return stamp


def _npm_launch(server: str, env_dir: Path, target: str | Path | None) -> list[str]:
    spec = npm_spec(server)
    stamp = read_stamp(env_dir)
    if stamp is None or stamp.get("package") != spec.package:
        raise ServerEnvError(
            f"no installed {spec.package} at {env_dir}: install it with `tersetalk "
            f"mcp-experiment env --server {server} --dest {env_dir} --out ...`"
        )
    node = shutil.which("node") or "node"
    cmd = [node, str((env_dir / stamp["entry"]).absolute()), *spec.args]
    if spec.target == "arg":
        if target is None:
            raise ServerEnvError(f"the {server} server serves a folder: give --target")
        cmd.append(str(Path(target).absolute()))
    elif spec.target.startswith("env:") and target is not None:
        cmd = ["env", f"{spec.target[4:]}={Path(target).absolute()}", *cmd]
    return cmd


def launch_command(server: str, env_dir: str | Path, target: str | Path | None) -> list[str]:
    """The command that starts ``server`` from its venv (or npm folder), serving
    ``target`` (a database file, a repository, a folder, a memory file; none for
    everything), as an MCP client's config would name it."""
    if server in NPM_SERVERS:
        return _npm_launch(server, Path(env_dir), target)
    spec = server_spec(server)
    env_dir = Path(env_dir)
    if read_stamp(env_dir) is None or not _python(env_dir).exists():
        raise ServerEnvError(
            f"no built {spec.package} environment at {env_dir}: build it with "
            f"`tersetalk mcp-servers env --server {server} ...` or `snakemake --cores all mcp`"
        )
    return [str(_python(env_dir).absolute()), *spec.launch, spec.target_option,
            str(Path(target).absolute())]  # fmt: skip


# ---- the SQLite database ---------------------------------------------------------------

QUESTIONS_COLUMNS = ("id", "question", "answer", "type", "level", "n_supporting",
                     "n_paragraphs")  # fmt: skip
PAYLOADS_COLUMNS = ("id", "source", "request", "shape", "n_chars", "status", "occurrences")


def _hotpotqa_rows(path: Path, n: int) -> list[tuple]:
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            rows.append((r["id"], r["question"], r["answer"], r["type"], r["level"],
                         len(r["supporting_facts"]), len(r["context"])))  # fmt: skip
            if len(rows) >= n:
                break
    return rows


def _payload_rows(path: Path, n: int) -> list[tuple]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            rows.append(tuple(r[c] for c in PAYLOADS_COLUMNS))
            if len(rows) >= n:
                break
    return rows


def build_database(
    out: str | Path, *, hotpotqa: str | Path, toolresponses: str | Path, rows: int = 120
) -> dict:
    """A SQLite file with two tables from shipped data: ``questions`` (the first
    ``rows`` HotpotQA dev questions: id, question, answer, type, level and the counts of
    supporting facts and paragraphs) and ``payloads`` (the tool-response corpus's index:
    id, source, request, shape, size, status, occurrences). Written atomically."""
    out = Path(out)
    questions = _hotpotqa_rows(Path(hotpotqa), rows)
    payloads = _payload_rows(Path(toolresponses), rows)

    def write(tmp: Path) -> None:
        con = sqlite3.connect(tmp)
        try:
            with con:
                con.execute("CREATE TABLE questions (id TEXT PRIMARY KEY, question TEXT NOT "
                            "NULL, answer TEXT NOT NULL, type TEXT, level TEXT, n_supporting "
                            "INTEGER, n_paragraphs INTEGER)")  # fmt: skip
                con.executemany("INSERT INTO questions VALUES (?,?,?,?,?,?,?)", questions)
                con.execute("CREATE TABLE payloads (id TEXT PRIMARY KEY, source TEXT, "
                            "request TEXT, shape TEXT, n_chars INTEGER, status INTEGER, "
                            "occurrences INTEGER)")  # fmt: skip
                con.executemany("INSERT INTO payloads VALUES (?,?,?,?,?,?,?)", payloads)
        finally:
            con.close()

    write_atomic(out, write)
    summary = {"path": str(out), "questions": len(questions), "payloads": len(payloads)}
    log.info("wrote %s: %d questions, %d payloads", out, len(questions), len(payloads))
    return summary


# ---- the git repository ----------------------------------------------------------------

#: (message, {path: content}) per commit; the last edit is left uncommitted on purpose
#: (git_status and git_diff_unstaged have something to show).
_COMMITS: tuple[tuple[str, dict[str, str]], ...] = (
    (
        "Add the word counter",
        {
            "README.md": "# wordcount\n\nCounts words in text files.\n",
            "wordcount.py": (
                '"""Count words."""\n\n\ndef count(text: str) -> int:\n'
                "    return len(text.split())\n"
            ),
        },
    ),
    (
        "Count lines too",
        {
            "wordcount.py": (
                '"""Count words and lines."""\n\n\ndef count(text: str) -> int:\n'
                "    return len(text.split())\n\n\ndef lines(text: str) -> int:\n"
                '    return text.count("\\n") + (not text.endswith("\\n") and bool(text))\n'
            ),
        },
    ),
    (
        "Add tests",
        {
            "test_wordcount.py": (
                "from wordcount import count, lines\n\n\ndef test_count():\n"
                '    assert count("a b  c") == 3\n\n\ndef test_lines():\n'
                '    assert lines("a\\nb") == 2\n'
            ),
        },
    ),
    (
        "Document the command line",
        {
            "README.md": (
                "# wordcount\n\nCounts words and lines in text files.\n\n"
                "    python -m wordcount FILE...\n"
            ),
        },
    ),
)
#: the uncommitted edit the session stages and commits (its write step)
PENDING = {
    "wordcount.py": (
        '"""Count words, lines and characters."""\n\n\ndef count(text: str) -> int:\n'
        "    return len(text.split())\n\n\ndef lines(text: str) -> int:\n"
        '    return text.count("\\n") + (not text.endswith("\\n") and bool(text))\n\n\n'
        "def chars(text: str) -> int:\n    return len(text)\n"
    ),
}


def _git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, **GIT_ENV}
    if date is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout  # fmt: skip


def create_repository(out: str | Path) -> dict:
    """A throwaway git repository with a few commits (fixed author and dates, so the
    same hashes everywhere) and one uncommitted edit. Built beside ``out`` and renamed."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it owner-only
        _git(tmp, "init", "--quiet", "--initial-branch=main")
        _git(tmp, "config", "user.name", GIT_ENV["GIT_AUTHOR_NAME"])
        _git(tmp, "config", "user.email", GIT_ENV["GIT_AUTHOR_EMAIL"])
        _git(tmp, "config", "commit.gpgsign", "false")
        for message, files in _COMMITS:
            for name, content in files.items():
                (tmp / name).write_text(content, encoding="utf-8")
            _git(tmp, "add", *files)
            _git(tmp, "commit", "--quiet", "-m", message)
        for name, content in PENDING.items():
            (tmp / name).write_text(content, encoding="utf-8")
        head = _git(tmp, "rev-parse", "HEAD").strip()
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("wrote %s: %d commits, HEAD %s", out, len(_COMMITS), head[:12])
    return {"path": str(out), "commits": len(_COMMITS), "head": head}


# ---- the project repository of the tuned experiment ------------------------------------
#
# The repository above is the smallest that gives each git tool something to show; a
# coding agent's sessions run against a project with history. This one is a small Python
# package (PROJECT_PACKAGE) grown over a few dozen commits: a layout commit, one commit
# per module (the module and its tests), then a fixed plan of changes (functions added
# with their tests and their line in the README and __init__, default limits raised,
# guards for empty input, docs, releases with a changelog entry), each a real diff of
# one to four files. Everything is a pure function of the tables below, so its hashes
# and every answer of the git server are the same on every machine.

PROJECT_PACKAGE = "textkit"
_PROJECT_MODULES = ("tokenize", "normalize", "counter", "stats", "filters", "report",
                    "cache", "config", "loader", "cli")  # fmt: skip
_VERBS = ("split", "merge", "rank", "trim", "group", "pick", "score", "fold", "scan", "strip",
          "match", "join")  # fmt: skip
_NOUNS = ("words", "lines", "tokens", "pairs", "runs", "terms", "spans", "fields")
_EXPRS = ("item.strip()", "item.lower()", "item.casefold().strip()", "item.strip(PUNCT)",
          "' '.join(item.split())", "item.replace('\\t', ' ')",
          "item.rstrip('\\n')")  # fmt: skip
#: the commits after each module's first: (kind, module index); the kinds are add (a
#: function, its test, its README line and export), limit (a default raised), guard
#: (empty input returns at once), expr (what an item becomes), docs, release
_PROJECT_PLAN = (("add", 2), ("limit", 0), ("add", 3), ("guard", 2), ("docs", 2),
                 ("add", 0), ("expr", 3), ("release", 0), ("add", 5), ("limit", 2),
                 ("add", 1), ("guard", 5), ("add", 7), ("docs", 5), ("expr", 0),
                 ("add", 2), ("limit", 3), ("release", 0), ("add", 4), ("guard", 1),
                 ("add", 8), ("expr", 2), ("docs", 0), ("add", 6), ("release", 0))  # fmt: skip


@dataclass
class _Func:
    name: str
    expr: str
    limit: int
    guard: bool

    def render(self) -> str:
        verb, noun = self.name.split("_", 1)
        lines = [f"def {self.name}(items: Iterable[str], *, limit: int = {self.limit}) "
                 "-> list[str]:",
                 f'    """{verb.capitalize()} the {noun} of ``items``: at most ``limit`` of '
                 'them, empty ones dropped."""']  # fmt: skip
        if self.guard:
            lines += ["    if not items:", "        return []"]
        lines += ["    out: list[str] = []", "    for item in items:",
                  f"        value = {self.expr}", "        if not value:",
                  "            continue", "        out.append(value)",
                  "        if len(out) >= limit:", "            break",
                  "    return out"]  # fmt: skip
        return "\n".join(lines) + "\n"

    def test(self, module: str) -> str:
        return (f"def test_{self.name}():\n"
                f'    got = {module}.{self.name}(["  Alpha ", "", "beta\\n", "Gamma"], limit=2)\n'
                "    assert len(got) <= 2\n"
                f"    assert {module}.{self.name}([], limit=3) == []\n")  # fmt: skip


class _Project:
    """The package's files as they stand, rendered from its functions."""

    def __init__(self) -> None:
        self.funcs: dict[str, list[_Func]] = {}
        self.version = (0, 1, 0)
        self.changelog: list[str] = []
        self.usage: list[str] = []
        self.n = 0

    def new_func(self) -> _Func:
        i = self.n
        self.n += 1
        name = f"{_VERBS[i % len(_VERBS)]}_{_NOUNS[(i * 5 + i // len(_VERBS)) % len(_NOUNS)]}"
        return _Func(name, _EXPRS[i % len(_EXPRS)], 10 + 5 * (i % 4), i % 3 == 0)

    def module(self, m: str) -> str:
        head = (f'"""{m.capitalize()} helpers of {PROJECT_PACKAGE}: each takes an iterable '
                'of strings and returns a list."""\n\nfrom __future__ import annotations\n\n'
                "from collections.abc import Iterable\n\n"
                'PUNCT = ".,;:!?\\"\'()[]"\n\n\n')  # fmt: skip
        return head + "\n\n".join(f.render() for f in self.funcs[m])

    def tests(self, m: str) -> str:
        return (f"from {PROJECT_PACKAGE} import {m}\n\n\n"
                + "\n\n".join(f.test(m) for f in self.funcs[m]))  # fmt: skip

    def init(self) -> str:
        names = sorted((f.name, m) for m, fs in self.funcs.items() for f in fs)
        imports = "".join(f"from .{m} import {n}\n" for n, m in names)
        return (f'"""{PROJECT_PACKAGE}: small text helpers."""\n\n{imports}\n'
                f'__version__ = "{".".join(map(str, self.version))}"\n__all__ = [\n'
                + "".join(f'    "{n}",\n' for n, _ in names) + "]\n")  # fmt: skip

    def readme(self) -> str:
        rows = "".join(f"| `{m}.{f.name}` | at most {f.limit} {f.name.split('_', 1)[1]} |\n"
                       for m, fs in self.funcs.items() for f in fs)  # fmt: skip
        return (f"# {PROJECT_PACKAGE}\n\nSmall helpers for lists of strings: tokenizing, "
                "normalizing, counting and reporting.\n\n    pip install -e .\n    "
                f"python -m {PROJECT_PACKAGE}.cli FILE...\n\n## Functions\n\n"
                "| function | returns |\n|---|---|\n" + rows)  # fmt: skip

    def pyproject(self) -> str:
        return ("[build-system]\nrequires = [\"setuptools>=68\"]\n"
                "build-backend = \"setuptools.build_meta\"\n\n[project]\n"
                f'name = "{PROJECT_PACKAGE}"\nversion = "{".".join(map(str, self.version))}"\n'
                'requires-python = ">=3.10"\ndescription = "Small text helpers"\n\n'
                "[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n")  # fmt: skip

    def files_for(self, m: str) -> dict[str, str]:
        return {f"src/{PROJECT_PACKAGE}/{m}.py": self.module(m),
                f"tests/test_{m}.py": self.tests(m)}  # fmt: skip


def _project_commits() -> list[tuple[str, dict[str, str]]]:
    """The project's commits, (message, {path: new content}), in order."""
    p = _Project()
    commits: list[tuple[str, dict[str, str]]] = []
    p.usage = ["# Usage\n", f"Every helper of {PROJECT_PACKAGE} takes an iterable of strings "
               "and a keyword-only `limit`.\n"]  # fmt: skip
    commits.append(("Start the package: layout, build file, README", {
        "pyproject.toml": p.pyproject(), ".gitignore": "__pycache__/\n*.egg-info/\n.venv/\n",
        "Makefile": "test:\n\tpython -m pytest -q\n\nlint:\n\truff check src tests\n",
        "docs/design.md": (f"# Design\n\n{PROJECT_PACKAGE} keeps each helper pure: a list "
                           "in, a list out, no state between calls.\n\nLimits are keyword-"
                           "only so that a call says how much it wants.\n"),
        "docs/usage.md": "\n".join(p.usage), "README.md": p.readme(), "CHANGELOG.md":
        "# Changelog\n", f"src/{PROJECT_PACKAGE}/__init__.py": p.init()}))  # fmt: skip
    for m in _PROJECT_MODULES:
        p.funcs[m] = [p.new_func(), p.new_func()]
        commits.append((f"Add the {m} module", {**p.files_for(m), "README.md": p.readme(),
                        f"src/{PROJECT_PACKAGE}/__init__.py": p.init()}))  # fmt: skip
    for step, (kind, k) in enumerate(_PROJECT_PLAN):
        m = _PROJECT_MODULES[k]
        fs = p.funcs[m]
        f = fs[step % len(fs)]
        if kind == "add":
            f = p.new_func()
            fs.append(f)
            msg = f"Add {m}.{f.name}"
            files = {**p.files_for(m), "README.md": p.readme(),
                     f"src/{PROJECT_PACKAGE}/__init__.py": p.init()}  # fmt: skip
        elif kind == "limit":
            f.limit += 15
            msg, files = f"Raise the default limit of {m}.{f.name} to {f.limit}", {
                **p.files_for(m), "README.md": p.readme()}  # fmt: skip
        elif kind == "guard":
            f.guard = not f.guard
            what = "return early on empty input" if f.guard else "drop the early return"
            msg = f"{m}.{f.name}: {what}"
            files = p.files_for(m)
        elif kind == "expr":
            f.expr = _EXPRS[(_EXPRS.index(f.expr) + 3) % len(_EXPRS)]
            msg, files = f"{m}.{f.name}: each item becomes {f.expr}", p.files_for(m)
        elif kind == "docs":
            p.usage.append(f"\n## {m}\n\n" + "".join(
                f"- `{g.name}(items, limit={g.limit})`: {g.name.split('_', 1)[1]} of the items\n"
                for g in fs))  # fmt: skip
            msg, files = f"Document the {m} module", {"docs/usage.md": "\n".join(p.usage)}
        else:
            p.version = (0, p.version[1] + 1, 0)
            v = ".".join(map(str, p.version))
            p.changelog.insert(0, f"\n## {v}\n\n" + "".join(
                f"- {c[0]}\n" for c in commits[-6:] if not c[0].startswith("Release")))  # fmt: skip
            msg = f"Release {v}"
            files = {"pyproject.toml": p.pyproject(), "CHANGELOG.md":
                     "# Changelog\n" + "".join(p.changelog),
                     f"src/{PROJECT_PACKAGE}/__init__.py": p.init()}  # fmt: skip
        commits.append((msg, files))
    return commits


#: the project's uncommitted edit (the sessions' write steps stage and unstage it)
PROJECT_PENDING_MODULE = "counter"


def _project_pending() -> dict[str, str]:
    path = f"src/{PROJECT_PACKAGE}/{PROJECT_PENDING_MODULE}.py"
    extra = _Func("count_blanks", "item.strip()", 25, True).render()
    return {path: _final_files()[path] + "\n\n" + extra}


#: how many commits the project has: the layout, one per module, the plan's
PROJECT_COMMITS = 1 + len(_PROJECT_MODULES) + len(_PROJECT_PLAN)


@functools.cache
def _final_files() -> dict[str, str]:
    out: dict[str, str] = {}
    for _, files in _project_commits():
        out.update(files)
    return out


def project_files() -> list[str]:
    """The project's tracked files at HEAD, sorted."""
    return sorted(_final_files())


def project_pending_files() -> list[str]:
    """The paths of the project's uncommitted edit (what a session's git_add stages)."""
    return sorted(_project_pending())


def create_project_repository(out: str | Path) -> dict:
    """The tuned experiment's project: a small Python package with a few dozen commits
    of real diffs (fixed author and dates) and one uncommitted edit. Built beside
    ``out`` and renamed into place."""
    commits, pending = _project_commits(), _project_pending()
    if len(commits) != PROJECT_COMMITS:
        raise ServerEnvError(f"the project plan made {len(commits)} commits, not {PROJECT_COMMITS}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        tmp.chmod(0o755)
        _git(tmp, "init", "--quiet", "--initial-branch=main")
        _git(tmp, "config", "user.name", GIT_ENV["GIT_AUTHOR_NAME"])
        _git(tmp, "config", "user.email", GIT_ENV["GIT_AUTHOR_EMAIL"])
        _git(tmp, "config", "commit.gpgsign", "false")
        start = int(GIT_ENV["GIT_AUTHOR_DATE"].split()[0])
        for i, (message, files) in enumerate(commits):
            for name, content in files.items():
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                (tmp / name).write_text(content, encoding="utf-8")
            _git(tmp, "add", *files)
            # a commit every 5 hours 17 minutes: the log shows a history, not one instant
            _git(tmp, "commit", "--quiet", "-m", message, date=f"{start + i * 19020} +0000")
        for name, content in pending.items():
            (tmp / name).write_text(content, encoding="utf-8")
        head = _git(tmp, "rev-parse", "HEAD").strip()
        n_files = len(_git(tmp, "ls-files").split())
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("wrote %s: %d commits, %d files, HEAD %s", out, len(commits), n_files, head[:12])
    return {"path": str(out), "commits": len(commits), "files": n_files, "head": head}


# ---- the memory server's knowledge graph of the tuned experiment ------------------------
#
# What an assistant's memory holds after some weeks on the project above: the people,
# the package's modules, decisions and open tasks, and how they relate (28
# entities with 3 to 5 observations each and 49 relations, the JSON lines the
# reference memory server reads). A pure function of the tables below.

_PEOPLE = (("Ada_Moreau", "maintainer", "reviews on Tuesdays", "prefers small commits"),
           ("Ben_Okafor", "contributor", "writes the tests first", "works from Lagos"),
           ("Chen_Wei", "contributor", "owns the release notes", "asks for benchmarks"),
           ("Dana_Kowalski", "designer of the CLI", "likes long options", "on leave in May"),
           ("Eli_Navarro", "user at a newsroom", "runs textkit on wire stories",
            "reported the empty-input bug"),
           ("Fay_Lindqvist", "maintainer", "keeps the docs",
            "answers issues within a day"))  # fmt: skip
_TOPICS = ("limits", "empty input", "unicode", "speed", "packaging", "docs", "tests", "CLI")


def _memory_entities() -> tuple[list[dict], list[dict]]:
    people = [p[0] for p in _PEOPLE]
    entities = [{"name": p[0], "entityType": "person",
                 "observations": [f"role: {p[1]}", *p[2:],
                                  f"cares about {_TOPICS[i % len(_TOPICS)]}"]}
                for i, p in enumerate(_PEOPLE)]  # fmt: skip
    relations = []
    for i, m in enumerate(_PROJECT_MODULES):
        owner = people[i % len(people)]
        name = f"{PROJECT_PACKAGE}.{m}"
        entities.append({"name": name, "entityType": "module", "observations": [
            f"source in src/{PROJECT_PACKAGE}/{m}.py, tests in tests/test_{m}.py",
            f"owned by {owner}", f"{2 + i % 3} public functions, all take a keyword-only limit",
            f"last touched in release 0.{1 + i % 4}.0"]})  # fmt: skip
        relations.append({"from": owner, "to": name, "relationType": "owns"})
        if i:
            dep = f"{PROJECT_PACKAGE}.{_PROJECT_MODULES[(i * 3) % i]}"
            relations.append({"from": name, "to": dep, "relationType": "imports"})
    for k in range(12):
        topic, who = _TOPICS[k % len(_TOPICS)], people[(k * 5) % len(people)]
        module = f"{PROJECT_PACKAGE}.{_PROJECT_MODULES[(k * 7) % len(_PROJECT_MODULES)]}"
        kind = "decision" if k % 3 else "task"
        name = f"{kind}_{k:02d}_{topic.replace(' ', '_')}"
        entities.append({"name": name, "entityType": kind, "observations": [
            f"about {topic} in {module}", f"raised by {who} in week {3 + k}",
            "agreed: keep the helpers pure" if kind == "decision" else "open: needs a test",
            f"see CHANGELOG 0.{1 + k % 4}.0" if kind == "decision"
            else "blocked on review"]})  # fmt: skip
        relations += [{"from": name, "to": module, "relationType": "concerns"},
                      {"from": who, "to": name, "relationType": "raised"}]  # fmt: skip
    for i, p in enumerate(people):
        relations.append({"from": p, "to": people[(i + 1) % len(people)],
                          "relationType": "reviews for"})  # fmt: skip
    return entities, relations


def memory_entity_names() -> list[str]:
    """The names of the graph's entities, in file order."""
    return [e["name"] for e in _memory_entities()[0]]


def build_memory_graph(out: str | Path) -> dict:
    """The tuned experiment's knowledge graph: the JSON lines of the reference memory
    server (one entity or relation per line). Written atomically."""
    entities, relations = _memory_entities()
    lines = [json.dumps({"type": "entity", **e}) for e in entities]
    lines += [json.dumps({"type": "relation", **r}) for r in relations]
    out = Path(out)
    text = "\n".join(lines) + "\n"
    write_atomic(out, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    log.info("wrote %s: %d entities, %d relations", out, len(entities), len(relations))
    return {"path": str(out), "entities": len(entities), "relations": len(relations)}

"""Reading and writing the workflow's tables: atomic writes, reads with clear errors.

Why one home: every step reads files another step wrote. A write that a kill
interrupts must never leave a half-file that looks finished (Snakemake would take it
as done), and a file that cannot be read must say which file and what to do, not end
in a pyarrow traceback. Parquet, CSV, LaTeX and YAML outputs all go through a
temporary file and :func:`os.replace`; the JSON a run file carries in its schema
metadata (spec, spec hash, model) is written and read here too.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas loads on first use: tokens.py writes its cache files here too
    import pandas as pd

__all__ = [
    "METADATA_KEY",
    "MESSAGE_FIELDS",
    "MAX_ALIAS_NODES",
    "MAX_NESTING",
    "InputFileError",
    "exclusive",
    "file_sha256",
    "load_json_text",
    "load_yaml_text",
    "message_list",
    "messages_arrow_type",
    "messages_column",
    "read_metadata",
    "read_parquet",
    "read_run_spec",
    "run_metadata",
    "unique_tmp",
    "write_atomic",
    "write_bytes_atomic",
    "write_csv_atomic",
    "write_parquet_atomic",
    "write_text_atomic",
    "write_manifest",
    "check_manifest",
]

#: the schema-metadata key under which a table carries its JSON metadata
METADATA_KEY = b"tersetalk"


class InputFileError(ValueError):
    """An input file is missing, truncated or not what the step expects."""


#: the deepest nesting a YAML or JSON document from a user (a config file, a router file,
#: a command-line option, an events line) may have: the deepest the workflow writes is
#: under 10; far deeper only makes the parsers and everything that walks the value recurse
#: until Python's stack gives out
MAX_NESTING = 100
#: how many values YAML aliases may add to a document beyond those written out: a
#: hand-written file adds a few; a "billion laughs" document (aliases of aliases of
#: aliases) expands a kilobyte into billions, which exhausts memory when walked
MAX_ALIAS_NODES = 100_000


def writable_text(text: str) -> str:
    """``text`` with every lone surrogate as its ``\\udXXX`` escape.

    What a model or its code writes may hold one (``chr(0xD800)``, or a server's JSON
    ``"\\ud800"``), which no UTF-8 file, Parquet or JSON writer takes: a record quoting
    it could never be written, on every rerun alike.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def load_yaml_text(text: str, where: str, error: type[Exception] = InputFileError) -> Any:
    """``yaml.safe_load(text)``, refusing documents nested deeper than :data:`MAX_NESTING`
    or whose aliases expand to more than :data:`MAX_ALIAS_NODES` extra values (or name
    a value they are inside of: a value containing itself, which no setting is).

    Why a pass over the parser's events first: PyYAML builds a document recursively (a
    20,000-deep one ends in RecursionError) and shares an alias's value, so a "billion
    laughs" file loads fine and exhausts memory only when a step dumps or walks it. The
    events are a flat stream: depth and expanded size are counted without recursion or
    expansion. ``where`` names the source (``"router file results/x.yaml"``); a refusal
    raises ``error`` starting with it. A syntax error is left to ``yaml.safe_load`` (its
    message names line and column), raised as ``yaml.YAMLError`` as before.
    """
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    # by depth: [anchor, values counted before it, the height of its tallest child]
    open_at: list[list[Any]] = []
    sizes: dict[str, int] = {}  # anchor -> how many values its node stands for
    heights: dict[str, int] = {}  # anchor -> how many levels its node nests (a scalar: 0)
    written = expanded = 0

    def too_deep(event: Any) -> Exception:
        line = event.start_mark.line + 1 if event.start_mark else "?"
        return error(
            f"{where}: nested deeper than {MAX_NESTING} levels (line {line}, aliases "
            "counted as the values they stand for), far deeper than anything the workflow "
            "reads: check the indentation and brackets"
        )

    def child(height: int) -> None:
        if open_at:
            open_at[-1][2] = max(open_at[-1][2], height)

    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.CollectionStartEvent):
                open_at.append([event.anchor, expanded, 0])
                written, expanded = written + 1, expanded + 1
                if len(open_at) > MAX_NESTING:
                    raise too_deep(event)
            elif isinstance(event, yaml.CollectionEndEvent):
                anchor, before, tallest = open_at.pop()
                child(tallest + 1)
                if anchor is not None:
                    sizes[anchor], heights[anchor] = expanded - before, tallest + 1
            elif isinstance(event, yaml.ScalarEvent):
                written, expanded = written + 1, expanded + 1
                if event.anchor is not None:
                    sizes[event.anchor], heights[event.anchor] = 1, 0
            elif isinstance(event, yaml.AliasEvent):
                if any(entry[0] == event.anchor for entry in open_at):
                    line = event.start_mark.line + 1 if event.start_mark else "?"
                    raise error(
                        f"{where}: alias *{event.anchor} (line {line}) is inside the value it "
                        "names, which would make the value contain itself; write it out"
                    )
                height = heights.get(event.anchor, 0)
                if len(open_at) + height > MAX_NESTING:  # the alias's value nests there
                    raise too_deep(event)
                child(height)
                written, expanded = written + 1, expanded + sizes.get(event.anchor, 1)
                if expanded - written > MAX_ALIAS_NODES:
                    raise error(
                        f"{where}: its YAML aliases (*name) expand to more than "
                        f"{MAX_ALIAS_NODES} values, far beyond any setting (a 'billion "
                        "laughs' document); write the values out instead of aliasing aliases"
                    )
    except yaml.YAMLError as exc:
        if isinstance(exc, error):  # a refusal above, raised as a kind of YAML error
            raise
        # not valid YAML: safe_load below says where, as it always has
    return yaml.safe_load(text)


#: a JSON string (skipped whole: its brackets are text) or a bracket
_JSON_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def load_json_text(text: str | bytes, where: str, error: type[Exception] = InputFileError) -> Any:
    """``json.loads(text)``, refusing a document nested deeper than :data:`MAX_NESTING`.

    Why: ``json.loads`` recurses per level (RecursionError on a crafted line), and a value
    it can still decode a few hundred levels deep breaks whatever walks it next (copying,
    validating, serialising a response). The refusal raises ``error`` (by default an
    :class:`InputFileError`, a ValueError, as a syntax error is) starting with ``where``.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") > MAX_NESTING:  # else it cannot be too deep
        depth = 0
        for token in _JSON_TOKENS.finditer(data):
            bracket = token.group()
            if bracket in (b"[", b"{"):
                depth += 1
                if depth > MAX_NESTING:
                    raise error(
                        f"{where}: JSON nested deeper than {MAX_NESTING} levels, far deeper "
                        "than anything the workflow reads: check the brackets"
                    )
            elif bracket in (b"]", b"}"):
                depth -= 1
    return json.loads(text)


#: the fields of one message of a run file's ``messages`` column (a Parquet list of
#: structs), with their Arrow types: what ``Conversation.send`` records
MESSAGE_FIELDS: tuple[tuple[str, str], ...] = (
    ("turn", "int64"),
    ("sender", "string"),
    ("receiver", "string"),
    ("kind", "string"),
    ("content", "string"),
    ("bytes", "int64"),
    ("tokens_cl100k", "int64"),
    ("tokens_o200k", "int64"),
    ("tokens_model", "int64"),
)


def messages_arrow_type():
    """``list<struct<turn, sender, ...>>``: the Parquet type of the ``messages`` column,
    fixed so that every run file has the same schema (an all-error run included)."""
    import pyarrow as pa

    return pa.list_(pa.struct([(name, pa.type_for_alias(t)) for name, t in MESSAGE_FIELDS]))


def messages_column(values) -> Any:
    """A ``messages`` column (values in any form :func:`message_list` reads) as pandas
    reads it back from a run file: an array of arrays of dicts with the fixed fields, so
    the frame a step returns equals the one it wrote."""
    import pyarrow as pa

    rows = [[{k: m.get(k) for k, _ in MESSAGE_FIELDS} for m in message_list(v)] for v in values]
    return pa.array(rows, type=messages_arrow_type()).to_numpy(zero_copy_only=False)


def strings_column(values) -> Any:
    """A column of string lists (or missing values) as pandas reads it back from a
    Parquet file: an array of arrays of str, None where a row has none."""
    import pyarrow as pa

    rows = [
        None if v is None or (isinstance(v, float) and v != v) else [str(x) for x in v]
        for v in values
    ]
    return pa.array(rows, type=pa.list_(pa.string())).to_numpy(zero_copy_only=False)


def message_list(value: Any) -> list[dict]:
    """A record's ``messages`` as a list of dicts, whatever form it was read in.

    Run files store a nested list of structs (pandas reads it as an array of dicts);
    results written before that stored a JSON string, and checkpoints hold a plain
    list. All three, and a missing value, are accepted so old results folders load.
    """
    if value is None:
        return []
    if isinstance(value, str):
        return json.loads(value) if value.strip() else []
    if isinstance(value, float) and value != value:  # NaN: a missing value
        return []
    if isinstance(value, dict):
        raise InputFileError("a messages value is one object, not a list of messages")
    try:
        return [dict(m) for m in value]
    except (TypeError, ValueError) as exc:
        raise InputFileError(f"unreadable messages value ({type(value).__name__})") from exc


def read_parquet(path: str | Path, what: str = "input") -> pd.DataFrame:
    """Read a Parquet file; any failure names the file, the cause and the fix."""
    import pandas as pd

    path = Path(path)
    if not path.exists():
        raise InputFileError(f"{what} file {path} does not exist")
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InputFileError(
            f"{what} file {path} is not a readable Parquet file ({type(exc).__name__}: "
            f"{str(exc)[:300]}); it may be truncated by a crash or not Parquet at all: delete "
            "it and rerun the step that writes it"
        ) from exc


def unique_tmp(out: str | Path) -> Path:
    """A temporary path beside ``out`` that no other writer uses (not yet created).

    Why not ``out + ".tmp"``: two writers of one file (a rerun while a job still runs,
    two processes merging the same side files) would write into the same temporary file
    and one would rename the other's half-written bytes into place. The
    process id and 64 random bits keep the names apart; beside ``out`` keeps the rename
    on one file system. The writer creates the file, so it gets the usual permissions
    (``mkstemp`` would make it owner-only).
    """
    out = Path(out)
    return out.with_name(f"{out.name}.{os.getpid()}.{secrets.token_hex(8)}.tmp")


@contextlib.contextmanager
def exclusive(lock: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``lock`` (made if missing) for the block.

    Why: an atomic rename keeps a reader from seeing half a folder, but two processes
    building the same folder at once (two test workers, two jobs) would both build it
    and then replace each other's, one of them while the other uses it. Under the lock
    the second waits, then finds the first's result. An advisory ``flock``: the kernel
    drops it when its holder exits, so a killed builder never leaves it held.
    """
    lock = Path(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes (hex), read in 1 MiB blocks: the one file digest
    every data file, model file, figure and environment check uses."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_atomic(out: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``out``, then rename it over ``out``.

    The rename is atomic on one file system, so ``out`` is either the old file or the
    complete new one; each writer has its own temporary file (:func:`unique_tmp`), and a
    write that fails leaves no temporary file behind.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = unique_tmp(out)
    try:
        write(tmp)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out


_atomic = write_atomic  # the name the tests and older callers use


def write_bytes_atomic(data: bytes, out: str | Path) -> Path:
    """Write ``data`` to ``out``, atomically."""
    return write_atomic(out, lambda tmp: tmp.write_bytes(data))


def write_parquet_atomic(df: pd.DataFrame, out: str | Path, metadata: dict | None = None) -> Path:
    """Write ``df`` to ``out`` through a temporary file and an atomic rename.

    ``metadata`` (JSON; anything else, such as a path or a NumPy number, is written as
    its ``str``) is stored in the schema metadata under ``tersetalk``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    nested = None
    if "messages" in df.columns and not all(
        v is None or isinstance(v, str) for v in df["messages"]
    ):
        # a run file's conversation: a list of structs of one fixed type (an empty
        # conversation would otherwise make it list<null>, a JSON string a mixed column)
        nested = [
            [{k: m.get(k) for k, _ in MESSAGE_FIELDS} for m in message_list(v)]
            for v in df["messages"]
        ]
        df = df.assign(messages=[[] for _ in nested])
    table = pa.Table.from_pandas(df, preserve_index=False)
    if nested is not None:
        column = pa.array(nested, type=messages_arrow_type())
        i = table.column_names.index("messages")
        table = table.set_column(i, pa.field("messages", column.type), column)
    if metadata:
        meta = dict(table.schema.metadata or {})
        meta[METADATA_KEY] = json.dumps(metadata, sort_keys=True, default=str).encode()
        table = table.replace_schema_metadata(meta)
    return write_atomic(out, lambda tmp: pq.write_table(table, tmp))


def write_csv_atomic(df: pd.DataFrame, out: str | Path, *, index: bool = False) -> Path:
    """``df.to_csv(out, index=index)``, atomically."""
    return write_atomic(out, lambda tmp: df.to_csv(tmp, index=index))


def write_text_atomic(text: str, out: str | Path) -> Path:
    """Write ``text`` (UTF-8) to ``out``, atomically: LaTeX tables, YAML documents."""
    return write_atomic(out, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_manifest(out: str | Path, files: list[str], written_by: str) -> Path:
    """A job's manifest: the files it wrote, each with its SHA-256, as JSON.

    Why: one workflow job writes several files whose set differs by task (a batch of
    runs, a group of scores), while a Snakemake rule declares one fixed set of outputs.
    The rule declares the manifest; the jobs that read the files depend on it, and
    :func:`check_manifest` tells them when a listed file was removed or replaced since.
    """
    listed = [{"path": str(f), "sha256": file_sha256(f)} for f in files]
    text = json.dumps({"written_by": written_by, "files": listed}, indent=1) + "\n"
    return write_text_atomic(text, out)


def check_manifest(path: str | Path) -> list[str]:
    """The files a manifest lists, once each is checked to be the file its job wrote;
    an InputFileError names the first that is missing or changed and how to rebuild it."""
    path = Path(path)
    try:
        data = load_json_text(path.read_bytes(), f"manifest {path}")
        listed = [(str(f["path"]), str(f["sha256"])) for f in data["files"]]
        by = str(data.get("written_by", "its job"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputFileError(
            f"manifest {path} is unreadable ({type(exc).__name__}: {str(exc)[:200]}); delete "
            "it and rerun the workflow, which reruns the job that writes it"
        ) from exc
    for name, digest in listed:
        try:
            found = Path(name).is_file()
            same = found and file_sha256(name) == digest
        except OSError:  # a name no file can have (too long, a NUL): not the job's file
            found, same = False, False
        if not same:
            what = "is missing" if not found else "changed"
            raise InputFileError(
                f"{name} {what} since {by} wrote it (manifest {path}); delete the manifest "
                "and rerun the workflow to write the file again"
            )
    return [name for name, _ in listed]


def run_metadata(spec: dict, digest: str, client: Any) -> dict:
    """What a run file carries: the run spec, its hash, and the model client's description."""
    return {"spec": spec, "spec_hash": digest, "model": client.describe()}


def read_metadata(path: str | Path, what: str = "input") -> dict:
    """The JSON metadata a table was written with (``{}`` when it has none)."""
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        raise InputFileError(f"{what} file {path} does not exist")
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, ValueError) as exc:
        raise InputFileError(
            f"{what} file {path} is not a readable Parquet file ({type(exc).__name__}: "
            f"{str(exc)[:300]}); delete it and rerun the step that writes it"
        ) from exc
    if METADATA_KEY not in meta:
        return {}
    try:
        return json.loads(meta[METADATA_KEY])
    except ValueError as exc:
        raise InputFileError(f"{what} file {path}: its tersetalk metadata is not JSON") from exc


def run_task_options(path: str | Path) -> dict | None:
    """The task's config section as the run file at ``path`` had it (its spec's
    ``task_options``), which its scorer reads; None for a file without a run spec."""
    return (read_metadata(path, "run").get("spec") or {}).get("task_options")


def read_run_spec(path: str | Path, task: str | None = None) -> dict:
    """The run spec a run file was written with; with ``task``, check it belongs to it."""
    meta = read_metadata(path, "run")
    if "spec" not in meta:
        raise InputFileError(f"{path} carries no run spec in its metadata")
    spec = meta["spec"]
    if task is not None and spec["task"] != task:
        raise InputFileError(f"{path} is a {spec['task']} run, not {task}")
    return spec

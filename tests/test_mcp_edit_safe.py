"""Edit-safe by default: what a client may quote back passes byte-exact through the proxy.

An agent copies ``oldText`` for an edit from a file it read through the proxy; the edit
must apply. Structured data (JSON, Python literals, database rows) is still re-encoded.
Checked on the pipeline, on a small SDK server of our own over stdio (no npm), and on
the reference filesystem server from npm where npm can install it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import mcp.types as types
import pytest
from mcp_support import ROOT

from tersetalk.formats.solver import decode
from tersetalk.formats.tree import same_value
from tersetalk.mcp.config import parse
from tersetalk.mcp.editsafe import decide
from tersetalk.mcp.literal import parse_literal
from tersetalk.mcp.session import SessionPipeline

FIXTURE = ROOT / "tests" / "mcp_editsafe_server.py"
#: the reference filesystem server, pinned
FILESYSTEM = "@modelcontextprotocol/server-filesystem@2026.8.31"

TABLE = "# Tests\n\n| test | status | note |\n|---|---|---|\n" + "".join(
    f"| t{i} | {'pass' if i % 3 else 'fail'} | note{i} |\n" for i in range(25)
)
PACKAGE = json.dumps({"name": "demo", "version": "1.0.0", "dependencies": {
    f"package-number-{i}": f"^{i}.{i % 7}.0" for i in range(30)}}, indent=2) + "\n"  # fmt: skip
ROWS = str([{"id": i, "name": f"row {i}", "ok": i % 2 == 0} for i in range(40)])


def _tool(name: str, description: str, **annotations) -> types.Tool:
    ann = types.ToolAnnotations(**annotations) if annotations else None
    return types.Tool(name=name, description=description, input_schema={"type": "object"},
                      annotations=ann)  # fmt: skip


# what real servers list (names and descriptions as they send them)
CASES = [
    ("read_text_file", "Read the complete contents of a file from the file system as text.", False),
    ("read_multiple_files", "Read the contents of multiple files simultaneously.", False),
    (
        "edit_file",
        "Make line-based edits to a text file. Returns a git-style diff showing the changes made.",
        False,
    ),  # fmt: skip
    (
        "get_file_contents",
        "Get the contents of a file or directory from a GitHub repository",
        False,
    ),  # fmt: skip
    ("git_diff_staged", "Shows changes that are staged for commit", False),
    ("git_show", "Shows the contents of a commit", False),
    (
        "directory_tree",
        "Get a recursive tree view of files and directories as a JSON structure.",
        True,
    ),  # fmt: skip
    ("get_file_info", "Retrieve detailed metadata about a file or directory.", True),
    ("git_add", "Adds file contents to the staging area", True),
    ("read_query", "Execute a SELECT query on the SQLite database", True),
    ("read_graph", "Read the entire knowledge graph", True),
    ("list_directory", "Get a detailed listing of all files and directories", True),
]


@pytest.mark.parametrize(("name", "description", "encode"), CASES)
def test_each_real_tool_is_decided_from_its_name_and_description(name, description, encode):
    d = decide(parse({}), name, description)
    assert d.encode is encode, d.why


def test_the_annotations_title_counts_and_the_hints_are_shown():
    tool = _tool("fs_op_1", "does it", title="Read file", read_only_hint=True)
    d = decide(parse({}), tool.name, tool.description, tool.annotations)
    assert not d.encode and "title" in d.why and d.hints == "readOnlyHint=true"


def test_quoted_back_text_passes_byte_exact_and_structured_data_is_re_encoded():
    pipe = SessionPipeline(parse({"dedup": {"enabled": False}}))
    pipe.note_tool(_tool("read_text_file", CASES[0][1], read_only_hint=True))
    pipe.note_tool(_tool("read_query", CASES[-3][1]))
    for text in (TABLE, PACKAGE, ROWS):
        p = pipe.process("read_text_file", {"path": "x"}, text)
        assert p.text == text and p.verbatim and p.kind == "passthrough"
    rows = pipe.process("read_query", {"query": "SELECT"}, ROWS)
    assert rows.kind == "encoded" and not rows.verbatim
    assert same_value(decode(rows.text), parse_literal(ROWS))
    # a tool never listed is decided from its name alone
    assert pipe.process("git_diff", {}, PACKAGE).text == PACKAGE


@pytest.mark.parametrize(
    "config", [{"edit_safe": False}, {"tools": {"read_text_file": {"encode": True}}}]
)
def test_the_config_opts_in_to_re_encoding_quoted_text(config):
    pipe = SessionPipeline(parse({"dedup": {"enabled": False}, **config}))
    pipe.note_tool(_tool("read_text_file", CASES[0][1]))
    p = pipe.process("read_text_file", {"path": "package.json"}, PACKAGE)
    assert p.kind == "encoded" and same_value(decode(p.text), json.loads(PACKAGE))
    assert "config" in pipe.decision("read_text_file").why


def test_the_config_can_keep_structured_data_as_it_came():
    pipe = SessionPipeline(parse({"tools": {"read_query": {"encode": False}}}))
    assert pipe.process("read_query", {}, ROWS).text == ROWS


async def _edit_after_read(command: list[str], root: Path, files: dict, edits_list: bool):
    """Read each file through the proxy, copy a line of what came back as oldText, edit
    (``edits_list``: the filesystem server's ``edits: [{oldText, newText}]`` form)."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    args = ["-m", "tersetalk", "mcp-proxy", "--call-timeout", "120", "--", *command]
    proxied = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    out: dict = {}
    with anyio.fail_after(300):  # a hang detector, not a speed check
        async with AsyncExitStack() as stack:
            r, w = await stack.enter_async_context(stdio_client(proxied))
            p = await stack.enter_async_context(ClientSession(r, w))
            await p.initialize()
            await p.list_tools()
            for name, marker in files.items():
                path = str(root / name)
                read = await p.call_tool("read_text_file", {"path": path})
                seen = read.content[0].text
                old = next(line for line in seen.splitlines() if marker in line)
                new = old.replace(marker, marker + "-edited")
                edit = {"oldText": old, "newText": new}
                args = {"path": path, **({"edits": [edit]} if edits_list else edit)}
                edit = await p.call_tool("edit_file", args)
                out[name] = (seen, edit.is_error, edit.content[0].text)
    return out


def _write_files(root: Path) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "notes.md").write_text(TABLE, encoding="utf-8")
    (root / "package.json").write_text(PACKAGE, encoding="utf-8")
    return {"notes.md": "note7", "package.json": "package-number-11"}


def test_edit_after_read_applies_through_the_proxy(tmp_path):
    files = _write_files(tmp_path)
    command = [sys.executable, str(FIXTURE), str(tmp_path)]
    out = anyio.run(_edit_after_read, command, tmp_path, files, False)
    for name, (_seen, failed, said) in out.items():
        assert not failed, f"{name}: {said}"  # not "Could not find exact match"
    assert out["notes.md"][0] == TABLE and out["package.json"][0] == PACKAGE
    assert "note7-edited |" in (tmp_path / "notes.md").read_text()
    assert json.loads((tmp_path / "package.json").read_text())["dependencies"][
        "package-number-11-edited"
    ]


def test_explain_starts_the_server_lists_each_decision_and_exits(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tersetalk", "mcp-proxy", "--explain", "--",
         sys.executable, str(FIXTURE), str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("server 'editsafe-fixture' 1.0: 3 tool(s); edit_safe is on")
    by_tool = {line.split()[0]: line for line in lines[1:]}
    assert set(by_tool) == {"read_text_file", "edit_file", "read_query", "tersetalk_get"}
    assert "byte-exact" in by_tool["read_text_file"]
    assert "readOnlyHint=true" in by_tool["read_text_file"]
    assert "re-encoded" in by_tool["read_query"]
    assert "added" in by_tool["tersetalk_get"]


def test_explain_of_a_command_that_is_not_a_server_is_a_clear_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "tersetalk", "mcp-proxy", "--explain", "--call-timeout", "20",
         "--", sys.executable, "-c", "print('not MCP')"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2
    assert "did not list its tools" in done.stderr


def test_edit_after_read_through_the_reference_filesystem_server(tmp_path):
    from mcp_support import npm_server

    binary = npm_server(FILESYSTEM, "filesystem-npm")  # installed once, or skipped saying why
    root = tmp_path / "files"
    files = _write_files(root)
    root = root.resolve()
    out = anyio.run(_edit_after_read, [str(binary), str(root)], root, files, True)
    for name, (_seen, failed, said) in out.items():
        assert not failed, f"{name}: {said}"  # not "Could not find exact match"
    assert out["notes.md"][0] == TABLE and out["package.json"][0] == PACKAGE
    assert "note7-edited |" in (root / "notes.md").read_text()
    assert "package-number-11-edited" in (root / "package.json").read_text()


def test_tersetalk_get_after_a_write_says_the_content_changed():
    from tersetalk.mcp.proxy import Telemetry, _retrieve

    pipe = SessionPipeline(parse({}))
    pipe.note_tool(_tool("read_text_file", CASES[0][1], read_only_hint=True))
    pipe.note_tool(_tool("edit_file", CASES[2][1], read_only_hint=False))
    pipe.annotated_writes.add("edit_file")
    a = pipe.process("read_text_file", {"path": "a.md"}, TABLE).ref
    b = pipe.process("read_text_file", {"path": "b.json"}, PACKAGE).ref
    before = _retrieve(pipe, {"ref": a}, Telemetry(None))
    assert [c.text for c in before.content] == [TABLE]
    pipe.before_call("edit_file", {"path": "a.md"})
    after = _retrieve(pipe, {"ref": a}, Telemetry(None))
    assert after.content[0].text == TABLE  # the result as it was sent, exact
    assert "edit_file ran after this result" in after.content[1].text
    assert len(_retrieve(pipe, {"ref": b}, Telemetry(None)).content) == 1  # another file
    # read again (unchanged bytes): the stored result is current again
    pipe.process("read_text_file", {"path": "a.md"}, TABLE)
    assert pipe.changed_note(a) is None

"""Markdown tables re-encoded only where the exact bytes come back.

What a client receives must decode to what the server sent, byte for byte: a table
row with more or fewer cells than its header, a ``|`` inside a code span, a unified
diff that touches a table and prose GFM reads as a row are kept as they came. The
properties generate such text (the CI profile of tests/conftest.py tries 200 cases)
and check the round trip through the encoder and through the proxy's pipeline, whose
``tersetalk_get`` returns the original.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tersetalk.formats import markdown as M
from tersetalk.formats.encoders import FormatDecodeError
from tersetalk.mcp import config as C
from tersetalk.mcp import telemetry as T
from tersetalk.mcp.session import SessionPipeline

ONE_LINER = "| test | fails |\n|---|---|\n" + "".join(
    f"| t{i} | {i} | note{i} |\n" for i in range(4)
)

TABLE_DIFF = """diff --git a/docs/results.md b/docs/results.md
index 3b18e51..a9f7c2d 100644
--- a/docs/results.md
+++ b/docs/results.md
@@ -3,9 +3,9 @@ The measured runs.
 | system | tokens | accuracy |
 |--------|--------|----------|
 | terse  | 1200   | 0.81     |
-| plain  | 2400   | 0.80     |
+| plain  | 2410   | 0.80     |
 | lingua | 1800   | 0.74     |
 | mixed  | 1500   | 0.79     |
 | other  | 1900   | 0.77     |
"""

# a table whose diff lines carry no leading space: GFM reads a table out of it
BARE_TABLE_DIFF = "@@ -1,4 +1,4 @@\n| a | b |\n|---|---|\n-| 1 | 2 |\n+| 1 | 3 |\n" + "".join(
    f"| r{i} | v{i} |\n" for i in range(12)
)

PADDED = """# Tools

Some prose that stays as it is.

| name      | stars | archived |
|-----------|------:|----------|
""" + "".join(
    f"| name-{i:<4} | {i * 7:>5} | {'true' if i % 2 else 'false':<8} |\n" for i in range(12)
)

SPACED = "| id | name |\n| --- | --- |\n" + "".join(f"| {i} | name {i} |\n" for i in range(20))


def exact(text: str) -> None:
    """The encoder's output decodes to ``text``; so does the pipeline's, whose
    ``tersetalk_get`` returns ``text`` itself."""
    m = M.encode_markdown(text)
    assert M.decode_markdown(m.text) == text
    p = SessionPipeline(C.parse({}))
    out = p.process("t", {}, text)
    assert out.text == text or M.decode_markdown(out.text) == text
    assert p.retrieve(out.ref) == text


def test_a_row_wider_than_its_header_passes_through_byte_identical():
    out = SessionPipeline().process("t", {}, ONE_LINER)
    assert out.kind == "passthrough" and out.text == ONE_LINER
    assert out.fallback is not None and out.fallback.startswith("markdown kept as it came")
    exact(ONE_LINER)


@pytest.mark.parametrize("diff", [TABLE_DIFF, BARE_TABLE_DIFF], ids=["context", "bare"])
def test_a_diff_that_touches_a_table_stays_a_patch(diff):
    assert M.table_spans(diff)  # GFM does see a table in it
    m = M.encode_markdown(diff)
    assert m.replaced == 0 and m.text == diff and m.declined_why == "it looks like a unified diff"
    out = SessionPipeline().process("t", {}, diff)
    assert out.text == diff
    exact(diff)


def test_a_pipe_in_a_code_span_keeps_the_table():
    text = "| cmd | what |\n|---|---|\n" + "".join(
        f"| `ls {i} | wc -l` | count {i} |\n" for i in range(12)
    )
    m = M.encode_markdown(text)
    assert m.replaced == 0 and m.declined == 1 and m.text == text


@pytest.mark.parametrize("text", [PADDED, SPACED], ids=["padded", "spaced"])
def test_clean_tables_are_still_re_encoded_and_come_back_exact(text):
    m = M.encode_markdown(text)
    assert m.replaced == 1 and m.tokens < m.source_tokens
    assert M.decode_markdown(m.text) == text
    out = SessionPipeline().process("t", {}, text)
    assert out.kind == "encoded" and out.lossless and out.sent_tokens < out.raw_tokens
    assert M.decode_markdown(out.text) == text


def test_a_block_without_a_layout_is_refused_with_a_reason():
    with pytest.raises(FormatDecodeError, match="names no table layout"):
        M.decode_markdown('```tt:json\n[{"a":"1"}]\n```')
    with pytest.raises(FormatDecodeError, match="not closed"):
        M.decode_markdown("```tt:json ~pc|---|\n[]")


def test_a_re_encoding_that_does_not_read_back_sends_the_original_and_is_counted(
    tmp_path, monkeypatch
):
    """An encoder bug (a block that decodes to other text) never reaches the client."""
    real = M.encode_markdown

    def wrong(text, *a, **kw):
        m = real(text, *a, **kw)
        return M.MarkdownEncoding(**{**m.__dict__, "text": m.text.replace("name 3", "name 4")})

    monkeypatch.setattr(M, "encode_markdown", wrong)
    p = SessionPipeline(C.parse({}))
    out = p.process("t", {}, SPACED)
    assert out.kind == "passthrough" and out.text == SPACED
    assert out.fallback.startswith("markdown re-encoding does not read back")
    rec = T.TelemetryRecorder(T.TelemetrySettings(tmp_path / "tel", 1.0, 1), session_id="s")
    rec.record("t", SPACED, out)
    summary = rec.summary()
    assert summary["readback_failures"] == 1
    assert summary["fallbacks"] == {"markdown_readback": 1}
    assert "name 3" not in json.dumps(summary)


# --- generated text ---------------------------------------------------------------------

_CLEAN = st.sampled_from(list("abxyz019-.") + [" ", "true", "12", "name"])
_DIRTY = st.sampled_from(list("ab xyz019-:|`\\*_.") + ["`a|b`", "\\|", "true", "12"])
_name = st.text("abcdefgh", min_size=1, max_size=5)


@st.composite
def tables(draw) -> str:
    """A GFM-ish table: clean or padded, maybe ragged, maybe with pipes in code spans,
    maybe without outer pipes or with a prose line glued to its end."""
    n = draw(st.integers(1, 4))
    header = draw(st.lists(_name, min_size=n, max_size=n, unique=True))
    nrows = draw(st.integers(0, 14))
    ragged = draw(st.booleans())
    cell = st.lists(draw(st.sampled_from([_CLEAN, _DIRTY])), max_size=6).map("".join)
    rows = [
        draw(st.lists(cell, min_size=max(0, n - ragged), max_size=n + ragged)) for _ in range(nrows)
    ]
    width = draw(st.sampled_from([0, 3, 8]))
    align = draw(st.sampled_from(["---", ":--", "--:", ":-:"]))
    just = {"-": str.ljust, ":": str.ljust}[align[0]] if align[-1] == "-" else str.rjust
    if align == ":-:":
        just = str.center
    spaced = draw(st.booleans())
    outer = draw(st.booleans())
    head_left = draw(st.booleans())

    def line(cells: list[str], j=just) -> str:
        body = "|".join(f" {j(c, width)} " if spaced or width else c for c in cells)
        return f"|{body}|" if outer else body

    dashes = align[0] + "-" * max(1, width - 2) + align[-1] if width else align
    delim = line([dashes] * n).replace(" ", "") if not spaced else line([dashes] * n)
    out = [
        line(header, str.ljust if head_left else just),
        delim,
        *(line([c.strip() for c in r]) for r in rows),
    ]
    if draw(st.booleans()):
        out.append(draw(st.sampled_from(["glued prose", "- a list item", "> quoted"])))
    return "\n".join(out)


@st.composite
def documents(draw) -> str:
    """Prose, tables and code around them; sometimes a unified diff of the lot."""
    parts = draw(
        st.lists(
            st.one_of(
                tables(),
                st.sampled_from(["# Title", "Some prose, with a | pipe.", "```\nx | y\n```", ""]),
            ),
            min_size=1,
            max_size=4,
        )
    )
    sep = draw(st.sampled_from(["\n\n", "\n"]))
    text = sep.join(parts) + draw(st.sampled_from(["", "\n"]))
    if draw(st.booleans()):
        marks = draw(st.lists(st.sampled_from(" +-"), min_size=1, max_size=1))
        lines = [marks[0] + x for x in text.split("\n")]
        head = draw(st.sampled_from(["@@ -1,9 +1,9 @@", "diff --git a/t.md b/t.md", ""]))
        text = "\n".join([head, *lines] if head else lines)
    return text


@given(documents())
@example(ONE_LINER)
@example(TABLE_DIFF)
@example(BARE_TABLE_DIFF)
@example(PADDED)
def test_every_document_comes_back_exact(text):
    exact(text)


@given(tables())
def test_a_table_that_is_replaced_renders_back_to_its_lines(text):
    m = M.encode_markdown(text)
    assert M.decode_markdown(m.text) == text
    assert m.replaced + m.declined <= m.tables
    if m.replaced:  # what was replaced reads back as rows of its text cells
        assert all(isinstance(rows, list) for rows in M.decode_tables(m.text))


@st.composite
def clean_tables(draw) -> list[str]:
    """Well-formed tables in the styles generators write: every row as wide as the
    header, outer pipes, cells tight, spaced or padded to the delimiter's widths."""
    n = draw(st.integers(1, 4))
    header = draw(st.lists(_name, min_size=n, max_size=n, unique=True))
    cell = st.lists(_CLEAN, max_size=4).map(lambda x: "".join(x).strip())
    rows = draw(st.lists(st.lists(cell, min_size=n, max_size=n), min_size=1, max_size=12))
    style = draw(st.sampled_from(["tight", "spaced", "padded"]))
    aligns = draw(st.lists(st.sampled_from(["l", "r", "c"]), min_size=n, max_size=n))
    just = {"l": str.ljust, "r": str.rjust, "c": str.center}
    widths = [max(3, *(len(r[j]) for r in [header, *rows])) for j in range(n)]
    if style != "padded":
        widths = [3] * n

    def dashes(w: int, a: str) -> str:
        return {"l": "-" * w, "r": "-" * (w - 1) + ":", "c": ":" + "-" * (w - 2) + ":"}[a]

    def line(cells: list[str]) -> str:
        if style == "tight":
            return "|" + "|".join(cells) + "|"
        if style == "spaced":
            return "| " + " | ".join(cells) + " |"
        return (
            "| "
            + " | ".join(just[a](c, w) for c, w, a in zip(cells, widths, aligns, strict=True))
            + " |"
        )

    delim = [
        dashes(w + 2 if style == "padded" else w, a) for w, a in zip(widths, aligns, strict=True)
    ]
    sep = "| " + " | ".join(delim) + " |" if style == "spaced" else "|" + "|".join(delim) + "|"
    return [line(header), sep, *(line(r) for r in rows)]


@given(clean_tables())
def test_well_formed_tables_have_a_layout_that_renders_them_exactly(lines):
    text = "\n".join(lines)
    (span,) = M.table_spans(text)
    layout = M.table_layout(lines, span.table)
    assert layout is not None, text
    assert M.render_table(list(span.table.header), [list(r) for r in span.table.rows],
                          layout) == lines  # fmt: skip
    m = M.encode_markdown(text)
    assert m.declined == 0 and M.decode_markdown(m.text) == text

"""The data dictionary: every column of every Parquet/CSV file the workflow writes.

Why here, as data: a column that a writer adds without a line in this module is a
column nobody can interpret a year later. ``tests/test_columns.py`` produces real
frames through the writing code (a run, its metrics, its score row) and fails on any
column no entry matches, and on entries that match nothing; ``docs/columns.md`` is
generated from this module (``tersetalk columns --markdown docs/columns.md``) and a
test checks it is up to date; ``tersetalk columns FILE`` documents one file's
columns and flags the undocumented ones.

An entry's ``pattern`` is a column name in which ``<placeholder>`` stands for one of
the values :data:`PLACEHOLDERS` lists (``tokens_<S>_<R>_cl100k``: ``tokens_M_W_cl100k``, ...).
Token columns are named ``tokens_<what>_<tokenizer>`` everywhere, and the summary's
means of them ``tokens_<what>_<tokenizer>_mean``.
``<column>`` is special: in ``<column>_mean`` it stands for any column the entry's
``of`` files document (the summary's means of per-example columns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tersetalk.core.tags import CAPPABLE_TAGS, REPAIR_KINDS, TAG_NAMES, TAGS

__all__ = [
    "FILES",
    "PLACEHOLDERS",
    "Column",
    "FileKind",
    "columns_for",
    "document",
    "entries",
    "file_kind",
    "markdown",
    "match",
    "undocumented",
]

#: what a ``<name>`` in a pattern may stand for (a regular expression)
PLACEHOLDERS: dict[str, str] = {
    "S": r"[A-Z][A-Z0-9]*",
    "R": r"[A-Z][A-Z0-9]*",
    "tokenizer": r"cl100k|o200k|model",
    "role": r"manager|worker|worker1|worker2|critic",
    "tag": "|".join(TAGS),
    "ctag": "|".join(CAPPABLE_TAGS),
    "kind": "|".join(REPAIR_KINDS),
    "route": r"tersetalk|llmlingua|overflow",
    "verdict": r"accept|revise|escalate",
    "package": r"[a-z0-9_]+",
    "oh": r"syntax|escape|label|ref|role|goal|title|question|echo",
    "fixed": r"star|chain",
}

_PLACEHOLDER_HELP = {
    "S": "sender letter (M Manager, W Worker, W1/W2 chain Workers, C Critic)",
    "R": "receiver letter, as for S",
    "tokenizer": "cl100k (tiktoken cl100k_base), o200k (tiktoken o200k_base), model "
    "(the run's own model tokenizer)",
    "role": "manager, worker, worker1, worker2, critic",
    "tag": "a TerseTalk line tag: " + ", ".join(f"{t} ({n})" for t, n in TAG_NAMES.items()),
    "ctag": "a cappable tag: " + ", ".join(CAPPABLE_TAGS),
    "kind": "a lenient-parser repair kind: " + ", ".join(REPAIR_KINDS),
    "route": "a hybrid route: tersetalk, llmlingua, overflow",
    "verdict": "a Critic verdict: accept, revise, escalate",
    "package": "a Python package name",
    "oh": "an overhead class of the audit: syntax, escape, label, ref, role, goal, "
    "title, question, echo",
    "fixed": "a fixed topology of the topology study: star, chain",
}


@dataclass(frozen=True)
class Column:
    """One documented column (or a family of columns, when ``pattern`` has placeholders).

    ``only`` names what writes it when not every row or run has it (a system, a task,
    the router); empty when every file of its kinds has it.
    """

    pattern: str
    dtype: str
    unit: str
    meaning: str
    files: tuple[str, ...]
    only: str = ""
    of: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileKind:
    """A kind of output file: where such files live and who writes them."""

    name: str
    paths: tuple[str, ...]
    writer: str
    row: str


_M = "results/<model>/"
FILES: dict[str, FileKind] = {
    f.name: f
    for f in [
        FileKind("run", (f"{_M}runs/<task>/<system>/<variant>.parquet",
                         f"{_M}runs/shards/<task>/<system>/<variant>/<shard>.parquet",
                         f"{_M}calibration/runs/<task>/<system>/<point>.parquet",
                         f"{_M}topology/runs/<task>/<system>/<variant>.parquet"),
                 "tersetalk.pipeline.records.build_record / core.records.records_frame "
                 "(tersetalk run)",
                 "one example of one run"),
        FileKind("metrics", (f"{_M}metrics/<task>/<system>/<variant>.parquet",),
                 "tersetalk.metrics.per_record.per_record_metrics (tersetalk score)",
                 "one example of one run, paired with the free-form reference"),
        FileKind("summary", (f"{_M}scores/<task>/<system>/<variant>.parquet",
                             f"{_M}summary.parquet", f"{_M}summary.csv"),
                 "tersetalk.metrics.summary.run_metrics / aggregate (tersetalk score, "
                 "tersetalk aggregate)", "one run"),
        FileKind("samples", ("results/samples/<task>.parquet",
                             "results/samples/<task>.calibration.parquet",
                             "results/samples/topology/<task>.parquet"),
                 "tersetalk.tasks.loading.sample (tersetalk sample)", "one example"),
        FileKind("stats", (f"{_M}stats/noninferiority.parquet",
                           f"{_M}stats/noninferiority.csv"),
                 "tersetalk.stats.noninferiority (tersetalk stats)",
                 "one (task, treatment, control) comparison"),
        FileKind("stats_sim", (f"{_M}stats/sim/table.parquet", f"{_M}stats/sim/table.csv"),
                 "tersetalk.stats.simulation (tersetalk stats-sim)",
                 "one grid point and quantity of the simulation study"),
        FileKind("stats_sim_summary", (f"{_M}stats/sim/summary.csv",),
                 "tersetalk.stats.simulation.summarise (tersetalk stats-sim)",
                 "one study and quantity: its worst value over the grid"),
        FileKind("table_main", (f"{_M}tables/main.csv",),
                 "tersetalk.plots.tables (tersetalk plot)", "one (task, run) of the paper table"),
        FileKind("table_targets", (f"{_M}tables/targets.csv",),
                 "tersetalk.stats.targets (tersetalk targets)", "one target of a design"),
        FileKind("topology_signals", (f"{_M}topology/calibration/<task>/<system>.parquet",
                                      f"{_M}topology/heldout/<task>/<system>.parquet"),
                 "tersetalk.pipeline.topology_signals.write_signals",
                 "one calibration or held-out brief"),
        FileKind("topology_heldout", (f"{_M}topology/heldout.csv",),
                 "tersetalk.topology.heldout.agreement_table",
                 "one system, router and subset of the held-out briefs"),
        FileKind("topology_heldout_loo", (f"{_M}topology/heldout_loto.csv",
                                          f"{_M}topology/heldout_lofo.csv"),
                 "tersetalk.topology.heldout",
                 "one system, router and task (or format) left out"),
        FileKind("topology_policies", (f"{_M}topology/policies.csv",
                                       f"{_M}topology/policies_by_task.csv",
                                       f"{_M}topology/six_policies.csv"),
                 "tersetalk.topology.metrics", "one routing policy (per task)"),
        FileKind("topology_oracle", (f"{_M}topology/outcome_oracle.csv",),
                 "tersetalk.topology.metrics.outcome_oracle",
                 "one example of a routed system: its outcome oracle"),
        FileKind("topology_loto", (f"{_M}topology/leave_one_task_out.csv",
                                   f"{_M}topology/leave_one_task_out_fitted.csv",
                                   f"{_M}topology/theta_sweep.csv",
                                   f"{_M}topology/ablations.csv"),
                 "tersetalk.topology.metrics / fit", "one held-out task or setting"),
        FileKind("formats", (f"{_M}formats/savings.parquet", f"{_M}formats/knapsack.parquet",
                             f"{_M}formats/dedup.parquet", f"{_M}formats/comprehension.parquet",
                             f"{_M}formats/*_summary.csv", f"{_M}formats/savings_by_shape.csv"),
                 "tersetalk.formats.experiments (tersetalk formats)",
                 "one payload, item, call or question"),
        FileKind("bench", ("results/bench/mb<N>.parquet", "results/bench/mb<N>.csv",
                           "results/bench/corpus.parquet", "results/mcp/mb5.parquet",
                           "results/mcp/mb5.csv"),
                 "tersetalk.bench (tersetalk bench)", "one measured method"),
        FileKind("bench_runs", ("results/bench/concurrency.csv",
                                "results/bench/concurrency_runs.csv",
                                "results/bench/events.parquet"),
                 "tersetalk.bench.concurrency, tersetalk.bench.events",
                 "one timed run or concurrency level"),
        FileKind("compare", ("results/compare/models.csv",),
                 "tersetalk.pipeline.sensitivity.comparison_table (tersetalk models compare)",
                 "one (model, task, run)"),
        FileKind("mcp", ("results/mcp/<server>.parquet", "results/mcp/summary.csv",
                         "results/mcp/tuned.parquet", "results/mcp/tuned_summary.csv"),
                 "tersetalk.mcp.experiment, tersetalk.mcp.tuned (tersetalk mcp-experiment)",
                 "one arm and step (summary: per server, arm and tool; tuned summary: per "
                 "server and arm)"),
        FileKind("audit", ("results/audit/audit.csv", "results/audit/summary.csv"),
                 "tersetalk.metrics.audit (tersetalk audit)",
                 "one token-overhead class per run and direction"),
    ]
}  # fmt: skip

_RUN = ("run",)
_RM = ("run", "metrics")
_SUM = ("summary",)
_ALL_EX = ("run", "metrics", "summary")

# ---- the c_* counters: a system's numeric counters, one column each in run files -------
# (records.build_record writes every bool/int/float counter as c_<name>; metrics copy them;
# the summary has c_<name>_mean over answered examples)
_COUNTERS: list[tuple[str, str, str, str, str]] = [
    # (name, dtype, unit, meaning, only)
    ("compliance_calls", "int64", "calls", "structured replies requested by the Speaker "
     "(Worker and Critic turns; tersetalk.agents.codecs.tersetalk.Speaker._note)", "tersetalk"),
    ("compliance_first_try", "int64", "calls", "replies valid on the first attempt "
     "(schema mode: 1 attempt; posthoc: parsed clean)", "tersetalk"),
    ("compliance_after_retries", "int64", "calls", "replies valid only after schema retries",
     "tersetalk"),
    ("compliance_repaired", "int64", "calls", "replies read only after lenient repairs",
     "tersetalk"),
    ("compliance_fallback", "int64", "calls", "replies with no readable structure, taken as raw "
     "text", "tersetalk"),
    ("repairs", "int64", "repairs", "lenient-parser repairs applied to replies, all kinds",
     "tersetalk"),
    ("repairs_<kind>", "int64", "repairs", "lenient-parser repairs of one kind "
     "(tersetalk.core.tags.REPAIR_KINDS)", "tersetalk"),
    ("reply_truncated", "int64", "fields", "reply fields cut to their length bound", "tersetalk"),
    ("reply_dropped", "int64", "items", "reply list items dropped past their count bound",
     "tersetalk"),
    ("lines_total", "int64", "lines", "lines of the Manager's brief after capping "
     "(protocol.caps.CapCounters)", "tersetalk"),
    ("lines_<tag>", "int64", "lines", "lines of the capped brief with this tag", "tersetalk"),
    ("overflow_total", "int64", "lines", "brief lines whose text went to memory behind an M# "
     "overflow pointer", "tersetalk"),
    ("overflow_<ctag>", "int64", "lines", "overflowed brief lines by original tag", "tersetalk"),
    ("compressed_total", "int64", "lines", "brief lines shortened by the summarizer instead of "
     "overflowing", "tersetalk"),
    ("compressed_<ctag>", "int64", "lines", "compressed brief lines by original tag", "tersetalk"),
    ("density", "float64", "ratio 0-1", "1 - overflow_total / lines_total (1 for an empty brief)",
     "tersetalk"),
    ("msg_lines_total", "int64", "lines", "TerseTalk lines of every message sent as lines "
     "(codecs.tersetalk.message_line_counts)", "tersetalk"),
    ("msg_lines_<tag>", "int64", "lines", "lines of the sent messages with this tag", "tersetalk"),
    ("msg_lines_<S>_<R>", "int64", "lines", "lines sent from S to R", "tersetalk"),
    ("deref_derefs", "int64", "pointers", "distinct M# pointers resolved for a Worker's need "
     "(re-injected)", "tersetalk"),
    ("deref_reinjected_tokens", "int64", "tokens (cl100k)", "tokens of the texts re-injected by "
     "dereferencing", "tersetalk"),
    ("deref_missing", "int64", "pointers", "requested M# ids the memory did not hold", "tersetalk"),
    ("memory_entries", "int64", "entries", "entries in the overflow memory at the end",
     "tersetalk"),
    ("memory_bytes", "int64", "bytes", "UTF-8 bytes held in the overflow memory at the end",
     "tersetalk"),
    ("memory_evictions", "int64", "entries", "entries evicted (FIFO) from the memory",
     "tersetalk"),
    ("memory_puts", "int64", "entries", "texts stored in the memory", "tersetalk"),
    ("tp_payload_calls", "int64", "calls", "LLMLingua touchpoint: payloads offered for "
     "compression (encoders.touchpoints)", "tersetalk"),
    ("tp_payload_fit", "int64", "calls", "payloads whose compression fit the cap", "tersetalk"),
    ("tp_summary_calls", "int64", "calls", "summaries made by LLMLingua instead of the "
     "summarizer", "tersetalk"),
    ("tp_deref_compressed", "int64", "texts", "dereferenced texts compressed before re-injection",
     "tersetalk"),
    ("tp_deref_tokens_saved", "int64", "tokens (cl100k)", "tokens saved by compressing "
     "dereferenced texts", "tersetalk"),
    ("t_touchpoints_s", "float64", "s", "time spent in the LLMLingua touchpoints (timing)",
     "tersetalk"),
    ("hybrid_budget", "int64", "tokens (cl100k)", "the hybrid's per-message token budget",
     "hybrid"),
    ("hybrid_gate", "bool", "flag", "whether the hybrid's gate was on", "hybrid"),
    ("turns", "int64", "messages", "messages the hybrid's gate decided", "hybrid"),
    ("route_<route>", "int64", "messages", "messages sent on this route", "hybrid"),
    ("share_<route>", "float64", "ratio 0-1", "route_<route> / turns", "hybrid"),
    ("over_budget_turns", "int64", "messages", "messages sent over the budget (nothing could "
     "overflow)", "hybrid"),
    ("projected_turns", "int64", "messages", "messages for which a compressed free-form size was "
     "projected", "hybrid"),
    ("brief_route_<route>", "int64", "0/1", "1 when the Manager's brief took this route",
     "hybrid"),
    ("brief_est_tt", "int64", "tokens (cl100k)", "estimated TerseTalk size of the brief",
     "hybrid"),
    ("brief_sent_tokens", "int64", "tokens (cl100k)", "tokens of the brief as sent", "hybrid"),
    ("brief_ff_tokens", "int64", "tokens (cl100k)", "free-form tokens of the brief (when "
     "projected)", "hybrid"),
    ("brief_projection", "float64", "tokens (cl100k)", "projected LLMLingua-compressed size of "
     "the brief", "hybrid"),
    ("projection_error_tokens", "float64", "tokens (cl100k)", "mean of sent - projected tokens "
     "over messages routed to LLMLingua", "hybrid"),
    ("lingua_messages", "int64", "messages", "messages compressed by LLMLingua", "hybrid"),
    ("lingua_origin_tokens", "int64", "tokens (cl100k)", "tokens of the message before "
     "compression (encoders.messages.message_counters)", "llmlingua, hybrid"),
    ("lingua_tokens", "int64", "tokens (cl100k)", "tokens of the message as sent",
     "llmlingua, hybrid"),
    ("lingua_rate", "float64", "ratio", "lingua_tokens / lingua_origin_tokens",
     "llmlingua, hybrid"),
    ("lingua_ctx_origin_tokens", "int64", "tokens (cl100k)", "compressible context tokens before "
     "compression", "llmlingua, hybrid"),
    ("lingua_ctx_tokens", "int64", "tokens (cl100k)", "context tokens after compression",
     "llmlingua, hybrid"),
    ("lingua_ctx_rate", "float64", "ratio", "compression rate of the context",
     "llmlingua, hybrid"),
    ("lingua_kept_tokens", "int64", "tokens (cl100k)", "tokens kept verbatim (question, "
     "instructions)", "llmlingua, hybrid"),
    ("lingua_target_rate", "float64", "ratio", "the target compression rate",
     "llmlingua, hybrid"),
    ("lingua_target_ctx_tokens", "int64", "tokens (cl100k)", "target size of the context",
     "llmlingua, hybrid"),
    ("lingua_scope_rate", "float64", "ratio", "achieved rate in the target's scope (context or "
     "message)", "llmlingua, hybrid"),
    ("lingua_rate_error", "float64", "ratio", "lingua_scope_rate / lingua_target_rate - 1",
     "llmlingua, hybrid"),
    ("lingua_abs_rate_error", "float64", "ratio", "|lingua_rate_error|", "llmlingua, hybrid"),
    ("lingua_within_tolerance", "int64", "0/1", "1 when |rate error| <= the configured "
     "tolerance", "llmlingua, hybrid"),
    ("lingua_target_unreachable", "int64", "0/1", "1 when the target could not be reached "
     "(kept parts alone exceed it)", "llmlingua, hybrid"),
    ("lingua_skipped", "int64", "0/1", "1 when compression was skipped", "llmlingua, hybrid"),
    ("lingua_attempts", "int64", "calls", "compressor calls made for the message",
     "llmlingua, hybrid"),
    ("lingua_fallbacks", "int64", "calls", "compressor retries at another rate",
     "llmlingua, hybrid"),
    ("lingua_forced_tokens", "int64", "tokens (cl100k)", "tokens forced to be kept (digits)",
     "llmlingua, hybrid"),
    ("lingua_compressor_mismatch", "int64", "0/1", "1 when the compressor folder does not match "
     "the embedded model", "llmlingua, hybrid"),
    ("t_lingua_s", "float64", "s", "time spent compressing (timing)", "llmlingua, hybrid"),
    ("t_lingua_cache_hit", "int64", "0/1", "1 when the compression was read from the "
     "LLMLingua cache (timing)", "llmlingua, hybrid"),
    ("mediator_original_tokens", "int64", "tokens", "tokens of the brief before mediation "
     "(systems.mediator_system.counters_of)", "mediator"),
    ("mediator_passes", "int64", "passes", "recursive compression passes", "mediator"),
    ("mediator_final_tokens", "int64", "tokens", "tokens after compression", "mediator"),
    ("mediator_ratio", "float64", "ratio", "final / original tokens", "mediator"),
    ("mediator_input_truncated", "bool", "flag", "whether the input was cut to the compressor's "
     "window", "mediator"),
    ("mediator_n_keys", "int64", "keys", "semantic keys extracted", "mediator"),
    ("mediator_judge_passed", "bool", "flag", "whether the judge accepted the mediated message",
     "mediator"),
    ("mediator_judge_confidence", "float64", "0-1", "the judge's confidence", "mediator"),
    ("mediator_delivered_tokens", "int64", "tokens", "tokens of the message delivered",
     "mediator"),
    ("mediator_passthrough", "bool", "flag", "whether mediation failed and the brief went "
     "unmediated", "mediator"),
    ("msp_original_tokens", "int64", "tokens", "tokens of the brief (systems.msp_system)", "msp"),
    ("msp_signal_tokens", "int64", "tokens", "tokens of the Minimal Signal's wire form", "msp"),
    ("msp_compression_ratio", "float64", "ratio", "signal / original tokens", "msp"),
    ("msp_decoded_tokens", "int64", "tokens", "tokens of the signal decoded back to prose", "msp"),
    ("msp_similarity", "float64", "0-1", "semantic similarity of decoded and original", "msp"),
    ("msp_judge_passed", "bool", "flag", "whether the semantic judge passed the signal", "msp"),
    ("msp_similarity_passed", "bool", "flag", "whether the similarity met its threshold", "msp"),
    ("msp_intent_present", "bool", "flag", "whether the decoded text states the intent", "msp"),
    ("msp_target_present", "bool", "flag", "whether the decoded text names the target", "msp"),
    ("msp_target_coverage", "float64", "ratio 0-1", "share of target terms the decoded text "
     "covers", "msp"),
    ("msp_passthrough", "bool", "flag", "whether encoding failed and the brief went as prose",
     "msp"),
    ("t_msp_encode_ms", "float64", "ms", "encoding time (timing)", "msp"),
    ("t_msp_decode_ms", "float64", "ms", "decoding time (timing)", "msp"),
    ("t_msp_judge_ms", "float64", "ms", "judging time (timing)", "msp"),
    ("t_msp_latency_ms", "float64", "ms", "total encode-decode-judge time (timing)", "msp"),
    ("planner_calls", "int64", "calls", "Manager planning calls made (agents.planner.PlanCounters)",
     "planner"),
    ("planner_first_try", "int64", "0/1", "the plan was valid at the first try", "planner"),
    ("planner_after_retries", "int64", "0/1", "valid after the backend's retries", "planner"),
    ("planner_repaired", "int64", "0/1", "rebuilt by the lenient reading", "planner"),
    ("planner_failed", "int64", "0/1", "a call was made and the brief went without a plan",
     "planner"),
    ("planner_parse_failures", "int64", "readings", "readings of the reply that failed",
     "planner"),
    ("planner_steps", "int64", "steps", "plan steps sent", "planner"),
    ("planner_steps_dropped", "int64", "steps", "steps past plan_max_steps or empty, not sent",
     "planner"),
    ("planner_steps_repeated", "int64", "steps", "steps repeating an earlier one, not sent",
     "planner"),
    ("planner_steps_truncated", "int64", "steps", "step texts cut to plan_step_chars",
     "planner"),
    ("planner_refs", "int64", "pointers", "M# references sent as d lines", "planner"),
    ("planner_refs_dropped", "int64", "pointers", "ids not sent (malformed or not in memory)",
     "planner"),
    ("planner_refs_repeated", "int64", "pointers", "ids already sent by an earlier step",
     "planner"),
    ("planner_lines_ignored", "int64", "lines", "reply lines neither a step nor a reference",
     "planner"),
    ("planner_input_truncated", "int64", "0/1", "the planner's input was cut to "
     "plan_input_chars", "planner"),
    ("planner_output_truncated", "int64", "0/1", "the reply hit the output limit", "planner"),
    ("planner_prompt_tokens", "int64", "tokens (model)", "the planning call's prompt tokens "
     "(-1: unknown)", "planner"),
    ("planner_completion_tokens", "int64", "tokens (model)", "its completion tokens "
     "(-1: unknown)", "planner"),
    ("cod_marker", "int64", "0/1", "1 when the Chain-of-Draft Worker wrote its answer marker "
     "(systems.freeform)", "freeform"),
    ("cod_fallback", "int64", "0/1", "1 when the answer was taken without the marker",
     "freeform"),
    ("format_payload_tokens", "int64", "tokens (cl100k)", "tokens of the tool payload as encoded "
     "(systems.formats_system)", "formats"),
    ("format_payload_tokens_pretty", "int64", "tokens (cl100k)", "tokens of the payload as "
     "pretty JSON", "formats"),
    ("format_payload_saving", "float64", "ratio", "1 - encoded / pretty tokens", "formats"),
    ("format_value_share", "float64", "ratio 0-1", "share of the payload's value kept under the "
     "budget", "formats"),
    ("format_lossless", "int64", "0/1", "1 when the encoding kept every value", "formats"),
    ("format_fallback", "int64", "0/1", "1 when the encoder fell back to JSON", "formats"),
]  # fmt: skip

_E = Column  # short name for the tables below
_COMMON: list[Column] = [
    _E("task", "string", "", "task name (hotpotqa, gsm8k, ...)", _ALL_EX + ("samples",)),
    _E("system", "string", "", "system name (freeform, tersetalk, ...)", _ALL_EX),
    _E("variant", "string", "", "variant of the system (config systems.<system>.variants); a "
       "calibration grid point's id in calibration runs", _ALL_EX),
    _E("seed", "int64", "", "the run's seed", _ALL_EX),
    _E("example_id", "string", "", "the example's id in its dataset", _RM + ("samples",)),
    _E("position", "int64", "index (0-based)", "the example's place in the sample, from 0",
       _RM + ("samples",)),
    _E("question", "string", "text", "the question as the task poses it", _RUN + ("samples",)),
    _E("gold", "string", "text", "the gold answer", _RUN + ("samples",)),
    _E("prediction", "string", "text", "the extracted answer (empty on an error row)", _RUN),
    _E("raw_answer", "string", "text", "the Worker's final reply before extraction", _RUN),
    _E("em", "float64", "0/1", "exact match (the task's official normalisation)", _RM + _SUM),
    _E("f1", "float64", "0-1", "token F1 (the task's official definition)", _RM + _SUM),
    _E("precision", "float64", "0-1", "token precision", _RUN + _SUM),
    _E("recall", "float64", "0-1", "token recall", _RUN + _SUM),
    _E("correct", "float64", "0/1", "the task's accuracy for this example (in a run file the "
       "run's live check; metrics, summaries and statistics read the score step's own "
       "computation from prediction and gold, or, for HumanEval, the run's sandbox "
       "verdict)", _RM),
    _E("verdict", "string", "", "the Critic's last verdict: accept, revise or escalate", _RUN,
       "star topology"),
    _E("verdict_explicit", "bool", "flag", "False when the Critic stated no verdict and accept "
       "was assumed", _RUN, "star topology"),
    _E("revisions", "int64", "rounds", "revise rounds the Critic asked for", _RUN,
       "star topology"),
    _E("tokens_<S>_<R>_cl100k", "int64", "tokens (cl100k)", "tokens of every message sent "
       "from S to R (metrics add o200k and model)", _RUN),
    _E("tokens_<S>_<R>", "int64", "tokens (cl100k)", "the name of tokens_<S>_<R>_cl100k in run "
       "files written by older versions (still read)", _RUN, "older files"),
    _E("tokens_total_<tokenizer>", "int64", "tokens", "tokens of every message of the "
       "conversation under this tokenizer; tokens_total_model is a nullable Int64, missing "
       "where the model's tokens cannot be counted (tokens_model_source says why)", _RM),
    _E("tokens_model_source", "string", "", "where tokens_model comes from: the model's own "
       "tokenizer (embedded llama.cpp), a server's tokenize endpoint, models.tokenizer "
       "(gguf:, tokenizer.json:, tiktoken:), or 'missing: <why>' (a hosted API with no "
       "tokenize endpoint and no models.tokenizer); summary: distinct values joined by '; '",
       _RUN + _SUM),
    _E("bytes_on_wire", "int64", "bytes", "UTF-8 bytes of every message sent", _RM),
    _E("n_messages", "int64", "messages", "messages sent between agents", _RUN),
    _E("n_model_calls", "int64", "calls", "model calls made (summary: summed over the run)",
       _RUN + _SUM),
    _E("usage_prompt_tokens", "float64", "tokens (model)", "prompt tokens the backend reported, "
       "summed over calls; NaN when any call's usage is unknown", _RUN),
    _E("usage_completion_tokens", "float64", "tokens (model)", "completion tokens the backend "
       "reported; NaN when any call's usage is unknown", _RUN),
    _E("usage_unknown_calls", "int64", "calls", "calls without usage from the backend (summary: "
       "summed)", _RUN + _SUM),
    _E("usage_source", "string", "", "where the usage counts came from, distinct sources "
       "joined by '; '", _RUN + _SUM),
    _E("messages", "list<struct>", "", "the conversation, one struct per message: turn "
       "(0-based), sender, receiver, kind, content, bytes, tokens_cl100k, tokens_o200k, "
       "tokens_model (tersetalk.core.io.MESSAGE_FIELDS); files written by older versions hold the "
       "same list as a JSON string (tersetalk.core.io.message_list reads both)", _RUN),
    _E("facts_checked", "list<string>", "facts", "the facts of the example's brief whose "
       "arrival at the Worker answer preservation checks (HotpotQA's supporting sentences, "
       "also under facts: context; GSM8K's sentences), recorded as the run built the brief; "
       "null on an error row whose brief was never built", _RUN),
    _E("counters", "string (JSON object)", "", "every protocol counter of the system "
       "(non-numeric ones too: logs, traces); numeric ones are also c_* columns", _RUN),
    _E("counters_timing", "string (JSON object)", "", "the system's own timings (counters "
       "named t_*)", _RUN),
    _E("backend", "string", "", "model backend (llamacpp, openai, scripted)", _RUN + _SUM),
    _E("model", "string", "", "model name the backend served", _RUN + _SUM),
    _E("model_fingerprint", "string", "", "what the model is, as the call cache keys it "
       "(tersetalk.models.fingerprint): sha256:<hex> (the GGUF file's sha256), ollama:<digest> "
       "(Ollama's model digest), report:<hex> (what an OpenAI-compatible server reports about "
       "the weights), script:<hex> (the scripted test double), declared:<text> (the config's "
       "models.fingerprint, when nothing the server reports identifies the weights), or "
       "weak:<backend>:<model>@<url or file> when nothing identifies them and the config "
       "allows it (models.allow_weak_identity): the cache keys on name and address; null in "
       "files written before fingerprints", _RUN),
    _E("model_fingerprint_source", "string", "", "how model_fingerprint was obtained; for a "
       "declared or weak one, why nothing better could be had (starts with its kind: "
       "file-sha256, ollama-digest, server-report, script, declared, weak; a weak one ends "
       "'(allowed by models.allow_weak_identity)')", _RUN),
    _E("spec_hash", "string", "", "hash of the run spec the row was produced with", _RUN),
    _E("error", "string", "", "the error that ended the example (null when it completed); "
       "error rows are kept, never dropped", _RM),
    _E("t_example_s", "float64", "s", "wall time of the example (timing)", _RM),
    _E("t_model_s", "float64", "s", "time inside model calls (timing)", _RUN),
    _E("t_ttft_mean_s", "float64", "s", "mean time to first token over calls (timing; "
       "summary: mean over examples)", _RM + _SUM),
    _E("t_itl_mean_s", "float64", "s", "mean inter-token latency over calls (timing)",
       _RM + _SUM),
    _E("cache_hits", "int64", "calls", "calls answered from the call cache (summary: summed)",
       _RUN + _SUM),
    _E("calls", "string (JSON list)", "", "one object per model call: role, timing, usage, "
       "attempts, cache hit", _RUN),
    _E("route", "string", "", "the topology the router chose (star or chain)", _RUN, "router"),
    _E("route_policy", "string", "", "the routing policy (fixed, rule, oracle, ...)", _RUN,
       "router"),
    _E("route_rule", "string", "", "the topology the rule picked before any override", _RUN,
       "router"),
    _E("route_label", "string", "", "the example's topology label (direct or collaborative "
       "optimal)", _RUN, "router"),
    _E("route_score", "float64", "", "the router's weighted signal score", _RUN + (
       "topology_signals",), "router"),
    _E("route_theta", "float64", "", "the threshold the score is compared with",
       _RUN + ("topology_signals",), "router"),
    _E("route_signals", "string (JSON object)", "counts", "the brief's signals, counted from "
       "its content (hops, quantities, arithmetic, conditions, code, plans)",
       _RUN + ("topology_signals",), "router"),
    _E("route_weights", "string (JSON object)", "", "the weights of the signals",
       _RUN + ("topology_signals",), "router"),
    _E("route_features", "string", "", "which features the router read", _RUN, "router"),
    _E("route_drop", "string", "", "the signal dropped in an ablation ('' for none)", _RUN,
       "router"),
    _E("route_scrambled", "bool", "flag", "whether the signals were scrambled (ablation)", _RUN,
       "router"),
    _E("route_capped", "bool", "flag", "whether the brief was capped before routing", _RUN,
       "router"),
    _E("t_route_s", "float64", "s", "time the routing decision took (timing)", _RUN, "router"),
    _E("sandbox_isolation", "string", "", "how the model's code was isolated (bwrap, ...)", _RUN,
       "humaneval"),
    _E("sandbox_reason", "string", "", "why the sandbox failed the program ('' when it passed)",
       _RUN, "humaneval"),
    _E("sandbox_detail", "string", "text", "the sandbox's output tail", _RUN, "humaneval"),
    _E("t_sandbox_s", "float64", "s", "time the sandboxed test took (timing)", _RUN,
       "humaneval"),
    # ---- metrics only
    _E("tokens_sent_<role>_<tokenizer>", "int64", "tokens", "tokens of the messages this role "
       "sent", ("metrics",)),
    _E("tokens_received_<role>_<tokenizer>", "int64", "tokens", "tokens of the messages this "
       "role received", ("metrics",)),
    _E("tokens_<S>_<R>_<tokenizer>", "int64", "tokens", "tokens sent from S to R under this "
       "tokenizer", ("metrics",)),
    _E("worker_input_is_jsonl", "bool", "flag", "whether the Worker's input was TerseTalk lines "
       "(rendered as prose for the semantic metrics)", ("metrics",)),
    _E("t_ttft_max_s", "float64", "s", "longest time to first token over calls (timing)",
       ("metrics",)),
    _E("tokens_per_s", "float64", "tokens/s", "completion tokens over model time (timing; "
       "summary: over examples with known usage)", ("metrics",) + _SUM),
    _E("gold_reaches_worker", "float64", "0/1", "whether the gold answer's words reach the "
       "Worker's input", ("metrics",)),
    _E("facts_reaching_worker", "float64", "ratio 0-1", "share of the supporting facts that reach "
       "the Worker", ("metrics",), "hotpotqa"),
    _E("n_facts_checked", "int64", "facts", "supporting facts checked for "
       "facts_reaching_worker (the run's facts_checked)", ("metrics",), "hotpotqa"),
    _E("reference_tokens_total_cl100k", "float64", "tokens (cl100k)", "total tokens of the "
       "free-form reference run on this example", ("metrics",)),
    _E("token_reduction", "float64", "ratio", "1 - tokens_total_cl100k / the reference's",
       ("metrics",)),
    _E("mw_token_reduction", "float64", "ratio", "the same for the brief's edge (M_W) alone",
       ("metrics",)),
    _E("semantic_jaccard", "float64", "0-1", "word Jaccard of the Worker's input with the "
       "reference's", ("metrics",)),
    _E("semantic_bertscore_f1", "float64", "0-1", "BERTScore F1 of the Worker's input with the "
       "reference's", ("metrics",)),
    _E("semantic_method", "string", "", "how the semantic score was computed (model, or why "
       "not)", ("metrics",) + _SUM),
    # ---- summary (scores/ and summary.parquet)
    _E("n", "int64", "examples", "examples of the run, error rows included", _SUM),
    _E("n_errors", "int64", "examples", "error rows", _SUM),
    _E("accuracy", "float64", "0-1", "the task's official accuracy over every gold example "
       "(error rows count 0)", _SUM),
    _E("<column>_mean", "float64", "as the column", "mean over answered examples of the "
       "per-example column", _SUM, of=("run", "metrics")),
    _E("n_usage_unknown", "int64", "examples", "examples whose usage is unknown", _SUM),
    _E("usage_mean_n", "int64", "examples", "answered examples with known usage (the rows the "
       "usage means average)", _SUM),
    _E("revision_rate", "float64", "ratio 0-1", "share of answered examples with a revise round",
       _SUM, "star topology"),
    _E("verdict_explicit_rate", "float64", "ratio 0-1", "share of explicit Critic verdicts",
       _SUM, "star topology"),
    _E("verdict_<verdict>_share", "float64", "ratio 0-1", "share of final verdicts of this kind",
       _SUM, "star topology"),
    _E("t_example_mean_s", "float64", "s", "mean example wall time (timing)", _SUM),
    _E("tokens_per_s_example_mean", "float64", "tokens/s", "mean of the per-example "
       "tokens_per_s (timing)", _SUM),
    _E("overflow_rate", "float64", "ratio 0-1", "pooled c_overflow_total / c_lines_total", _SUM,
       "tersetalk"),
    _E("compressed_rate", "float64", "ratio 0-1", "pooled c_compressed_total / c_lines_total",
       _SUM, "tersetalk"),
    _E("compliance_first_try_rate", "float64", "ratio 0-1", "pooled compliance_first_try / "
       "compliance_calls", _SUM, "tersetalk"),
    _E("compliance_after_retries_rate", "float64", "ratio 0-1", "pooled compliance_after_retries "
       "/ compliance_calls", _SUM, "tersetalk"),
    _E("compliance_repaired_rate", "float64", "ratio 0-1", "pooled compliance_repaired / "
       "compliance_calls", _SUM, "tersetalk"),
    _E("compliance_fallback_rate", "float64", "ratio 0-1", "pooled compliance_fallback / "
       "compliance_calls", _SUM, "tersetalk"),
    _E("route_<route>_share", "float64", "ratio 0-1", "pooled route_<route> / turns", _SUM,
       "hybrid"),
    _E("lingua_n_messages", "int64", "messages", "messages with an achieved and a target rate",
       _SUM, "llmlingua, hybrid"),
    _E("lingua_target_rate", "float64", "ratio", "the target rate (median when it varies)", _SUM,
       "llmlingua, hybrid"),
    _E("lingua_achieved_rate_p10", "float64", "ratio", "10th percentile of the achieved rate",
       _SUM, "llmlingua, hybrid"),
    _E("lingua_achieved_rate_p50", "float64", "ratio", "median achieved rate", _SUM,
       "llmlingua, hybrid"),
    _E("lingua_achieved_rate_p90", "float64", "ratio", "90th percentile of the achieved rate",
       _SUM, "llmlingua, hybrid"),
    _E("lingua_achieved_rate_mean", "float64", "ratio", "mean achieved rate", _SUM,
       "llmlingua, hybrid"),
    _E("lingua_n_reachable", "int64", "messages", "messages whose target was reachable", _SUM,
       "llmlingua, hybrid"),
    _E("lingua_within_20pct_share", "float64", "ratio 0-1", "among reachable messages, share "
       "within 20% of the target", _SUM, "llmlingua, hybrid"),
    _E("lingua_unreachable_n", "int64", "messages", "messages whose target was unreachable",
       _SUM, "llmlingua, hybrid"),
    _E("lingua_unreachable_share", "float64", "ratio 0-1", "lingua_unreachable_n / "
       "lingua_n_messages", _SUM, "llmlingua, hybrid"),
]  # fmt: skip

_OTHER: list[Column] = [
    # ---- samples
    _E("split", "string", "", "the dataset split the example comes from", ("samples",)),
    _E("row", "int64", "index (0-based)", "the example's row in the dataset file",
       ("samples",)),
    _E("record", "string (JSON object)", "", "the task's full record (context, facts, tests)",
       ("samples",)),
    # ---- stats/noninferiority
    *[_E(n, t, u, m, ("stats",)) for n, t, u, m in [
        ("task", "string", "", "task"),
        ("treatment", "string", "", "the run tested (system/variant)"),
        ("control", "string", "", "the run it is compared with (system/variant)"),
        ("n_treatment", "int64", "examples", "examples of the treatment"),
        ("n_control", "int64", "examples", "examples of the control"),
        ("n_paired", "int64", "examples", "examples both runs hold"),
        ("n_only_treatment", "int64", "examples", "examples only the treatment holds"),
        ("n_only_control", "int64", "examples", "examples only the control holds"),
        ("only_treatment", "string", "", "ids of those examples"),
        ("only_control", "string", "", "ids of those examples"),
        ("mean_diff", "float64", "accuracy points (0-1)", "mean paired accuracy difference "
         "treatment - control"),
        ("lower_bound", "float64", "accuracy (0-1)", "the deciding one-sided lower bound of the "
         "difference (binary: Tango score, continuity 1/2; continuous: the lower of the t and "
         "the studentized bootstrap bound)"),
        ("lower_bound_t", "float64", "accuracy (0-1)", "the t-interval's lower bound"),
        ("upper_bound", "float64", "accuracy (0-1)", "the deciding one-sided upper bound of the "
         "difference"),
        ("p_bootstrap", "float64", "p", "bootstrap p-value of H0: diff <= -margin"),
        ("p_t", "float64", "p", "paired t-test p-value of the same"),
        ("margin", "float64", "accuracy (0-1)", "the non-inferiority margin"),
        ("alpha", "float64", "", "the test's level"),
        ("n", "int64", "examples", "examples the test used"),
        ("n_resamples", "int64", "", "bootstrap resamples"),
        ("seed", "int64", "", "bootstrap seed"),
        ("non_inferior", "bool", "flag", "whether non-inferiority was shown"),
        ("method", "string", "", "the test's method"),
        ("mean_treatment", "float64", "0-1", "the treatment's accuracy"),
        ("mean_control", "float64", "0-1", "the control's accuracy"),
        ("note", "string", "", "remarks (too few examples, ...)"),
        ("lower_bound_above_margin", "bool", "flag", "lower_bound > -margin"),
        ("n_min", "int64", "examples", "examples needed for a verdict"),
        ("verdict", "string", "", "non-inferior, inconclusive or inferior"),
        ("verdict_reason", "string", "", "why the verdict, naming the rule that decided"),
        ("outcome", "string", "", "binary (every value 0 or 1) or continuous"),
        ("interval_method", "string", "", "the interval of lower_bound and upper_bound"),
        ("decided_by", "string", "", "floor rule, n_min rule, score interval or studentized "
         "interval"),
        ("floor", "float64", "0-1", "the control must be shown above this (the margin)"),
        ("control_lower", "float64", "0-1", "one-sided 1 - alpha lower bound of the control's "
         "mean (continuity-corrected Wilson for binary; the lower of the t and studentized "
         "bootstrap bounds otherwise)"),
        ("n_treatment_better", "int64", "examples", "examples where the treatment scores higher"),
        ("n_control_better", "int64", "examples", "examples where the control scores higher"),
        ("p_score", "float64", "p", "one-sided p of Tango's corrected score test at -margin "
         "(binary; NaN otherwise)"),
        ("lower_bound_tango", "float64", "accuracy (0-1)", "Tango's score bound without "
         "correction (binary)"),
        ("upper_bound_tango", "float64", "accuracy (0-1)", "its upper bound"),
        ("lower_bound_newcombe", "float64", "accuracy (0-1)", "Newcombe's method 10 lower bound "
         "(binary)"),
        ("upper_bound_newcombe", "float64", "accuracy (0-1)", "its upper bound"),
        ("lower_bound_bootstrap", "float64", "accuracy (0-1)", "paired percentile bootstrap "
         "lower bound"),
        ("upper_bound_bootstrap", "float64", "accuracy (0-1)", "its upper bound"),
        ("upper_bound_t", "float64", "accuracy (0-1)", "the t-interval's upper bound"),
        ("lower_bound_studentized", "float64", "accuracy (0-1)", "the studentized (bootstrap-t) "
         "lower bound alone (continuous; NaN for binary)"),
        ("upper_bound_studentized", "float64", "accuracy (0-1)", "its upper bound"),
        ("control_lower_wilson", "float64", "0-1", "the control's one-sided Wilson lower bound "
         "without continuity correction (binary; NaN otherwise)"),
        ("diff_ci_low", "float64", "0-1", "two-sided CI of the difference, low"),
        ("diff_ci_high", "float64", "0-1", "two-sided CI of the difference, high"),
        ("diff_ci_method", "string", "", "Tango score interval with a continuity correction "
         "(binary) or the wider of the t and studentized bootstrap intervals (continuous)"),
        ("accuracy_ci_method", "string", "", "continuity-corrected Wilson (binary) or the wider "
         "of the t and studentized bootstrap intervals (continuous)"),
        ("n_errors_as_wrong_treatment", "int64", "examples", "treatment error rows counted as "
         "wrong answers"),
        ("n_errors_as_wrong_control", "int64", "examples", "control error rows counted as "
         "wrong answers"),
        ("accuracy_treatment_ci_low", "float64", "0-1", "the treatment accuracy's CI, low"),
        ("accuracy_treatment_ci_high", "float64", "0-1", "the treatment accuracy's CI, high"),
        ("accuracy_control_ci_low", "float64", "0-1", "the control accuracy's CI, low"),
        ("accuracy_control_ci_high", "float64", "0-1", "the control accuracy's CI, high"),
        ("tokens_n", "int64", "examples", "paired examples of the token test"),
        ("tokens_mean_treatment", "float64", "tokens (cl100k)", "mean tokens of the treatment"),
        ("tokens_mean_control", "float64", "tokens (cl100k)", "mean tokens of the control"),
        ("tokens_reduction_mean", "float64", "tokens (cl100k)", "mean paired reduction"),
        ("tokens_reduction_median", "float64", "tokens (cl100k)", "median paired reduction"),
        ("tokens_relative_reduction", "float64", "ratio", "1 - treatment / control mean tokens"),
        ("tokens_relative_reduction_mean", "float64", "ratio", "mean per-example relative "
         "reduction"),
        ("tokens_relative_reduction_median", "float64", "ratio", "its median"),
        ("tokens_relative_reduction_ci_low", "float64", "ratio", "its CI, low"),
        ("tokens_relative_reduction_ci_high", "float64", "ratio", "its CI, high"),
        ("tokens_n_relative", "int64", "examples", "examples with a relative reduction"),
        ("tokens_t_statistic", "float64", "", "paired t statistic of the tokens"),
        ("tokens_p_ttest", "float64", "p", "its p-value"),
        ("tokens_wilcoxon_statistic", "float64", "", "Wilcoxon signed-rank statistic"),
        ("tokens_p_wilcoxon", "float64", "p", "its p-value"),
        ("tokens_alternative", "string", "", "the alternative hypothesis"),
        ("tokens_wilcoxon_zero_method", "string", "", "Wilcoxon's zero method"),
        ("tokens_note", "string", "", "remarks on the token test"),
        ("tokens_n_errors_excluded", "int64", "examples", "error rows left out"),
        ("confidence", "float64", "", "the CIs' confidence level"),
        ("key", "string", "", "the column pairing examples (example_id)"),
        ("accuracy_col", "string", "", "the accuracy column tested"),
        ("tokens_col", "string", "", "the token column tested"),
        ("not_computed", "string", "", "why the test was not computed ('' when it was)"),
    ]],
    # ---- stats/sim: the simulation study of the statistics
    *[_E(n, t, u, m, ("stats_sim",)) for n, t, u, m in [
        ("study", "string", "", "binary (paired 0/1), continuous (paired Beta scores) or router "
         "(agreement, tasks as clusters)"),
        ("scenario", "string", "", "at_margin (true difference -margin), no_difference (0); "
         "'' for the router study"),
        ("quantity", "string", "", "type1_error, power, inconclusive, inferior or "
         "coverage_<interval> (tersetalk.stats.simulation.QUANTITIES)"),
        ("base_rate", "float64", "0-1", "the control's true accuracy (binary) or mean score "
         "(continuous)"),
        ("true_diff", "float64", "0-1", "the true difference treatment - control"),
        ("n", "int64", "examples", "examples per replicate (router: tasks x examples per task)"),
        ("discordance_level", "float64", "0-1", "binary: P(arms differ) as a share of the way "
         "from |d| (0) to independent arms (1)"),
        ("discordance", "float64", "probability", "binary: the true P(arms differ)"),
        ("correlation", "float64", "", "continuous: the Gaussian copula's correlation"),
        ("concentration", "float64", "", "continuous: a + b of each arm's Beta"),
        ("n_tasks", "Int64", "tasks", "router: tasks (clusters) per replicate"),
        ("examples_per_task", "Int64", "examples", "router: examples per task"),
        ("agreement", "float64", "0-1", "router: the true mean agreement over tasks"),
        ("task_sd", "float64", "0-1", "router: its standard deviation between tasks"),
        ("tie_share", "float64", "0-1", "router: share of examples any topology gets right"),
        ("replicates", "int64", "replicates", "replicates of the grid point (0: infeasible)"),
        ("trials", "int64", "", "what the share is over (per-task Wilson: replicates x tasks)"),
        ("estimate", "float64", "share 0-1", "the share of trials with the event (verdict "
         "given, interval covering the truth)"),
        ("mcse", "float64", "share 0-1", "its Monte-Carlo standard error sqrt(p (1 - p) / trials)"),
        ("mcse_nominal", "float64", "share 0-1", "the same at the nominal value (alpha or "
         "confidence)"),
        ("mean_width", "float64", "0-1", "the interval's mean width (coverage rows)"),
        ("n_undefined", "int64", "trials", "trials whose interval was undefined (counted as "
         "not covering)"),
        ("target", "float64", "0-1", "the nominal value: alpha (type I error), confidence "
         "(coverage)"),
        ("threshold", "float64", "0-1", "acceptance: alpha + 2 mcse_nominal (type I error), "
         "coverage_floor (coverage)"),
        ("meets", "boolean", "flag", "the estimate is within the threshold (empty: no rule)"),
        ("within_mc", "boolean", "flag", "within 2 mcse_nominal of the nominal value"),
        ("margin", "float64", "0-1", "the non-inferiority margin"),
        ("alpha", "float64", "", "the verdict's one-sided level"),
        ("confidence", "float64", "", "the intervals' two-sided level"),
        ("n_resamples", "int64", "", "bootstrap resamples per replicate"),
        ("seed", "int64", "", "the study's seed"),
        ("note", "string", "", "why a point has no estimate (an infeasible truth); '' else"),
    ]],
    *[_E(n, t, u, m, ("stats_sim_summary",)) for n, t, u, m in [
        ("study", "string", "", "binary, continuous or router"),
        ("quantity", "string", "", "type1_error, power or coverage_<interval>"),
        ("what", "string", "", "the quantity in words"),
        ("role", "string", "", "what the interval is for: decides a verdict, reported, or a "
         "contrast (tersetalk.stats.simulation.ROLES)"),
        ("points", "int64", "grid points", "points with an estimate"),
        ("points_infeasible", "int64", "grid points", "points whose truth cannot exist"),
        ("worst", "string", "", "max (type I error, power) or min (coverage)"),
        ("worst_estimate", "float64", "share 0-1", "the worst estimate over the grid"),
        ("worst_mcse", "float64", "share 0-1", "its Monte-Carlo standard error"),
        ("worst_at", "string", "", "the grid point of the worst estimate"),
        ("mean_estimate", "float64", "share 0-1", "the mean estimate over the grid"),
        ("target", "float64", "0-1", "the nominal value"),
        ("threshold", "float64", "0-1", "the acceptance threshold at the worst point"),
        ("points_meeting", "int64", "grid points", "points within the threshold"),
        ("points_failing", "int64", "grid points", "points beyond it"),
        ("passes", "boolean", "flag", "no point fails (type I error <= alpha + 2 MC SE, "
         "coverage >= coverage_floor); <NA> for power"),
        ("points_beyond_mc", "int64", "grid points", "points beyond 2 mcse_nominal of nominal"),
        ("failing_at", "string", "", "the failing points with their estimates"),
    ]],
    # ---- tables/main.csv (display names)
    *[_E(n, t, u, m, ("table_main",)) for n, t, u, m in [
        ("task", "string", "", "task"), ("run", "string", "", "system/variant"),
        ("n", "int64", "examples", "examples"),
        ("accuracy", "float64", "0-1", "accuracy"),
        ("acc. CI low", "float64", "0-1", "accuracy bootstrap CI, low"),
        ("acc. CI high", "float64", "0-1", "accuracy bootstrap CI, high"),
        ("F1", "float64", "0-1", "token F1"),
        ("tokens/ex", "float64", "tokens (cl100k)", "mean tokens per example"),
        ("reduction vs ref", "float64", "ratio", "mean token_reduction"),
        ("BERTScore F1", "float64", "0-1", "mean semantic_bertscore_f1"),
        ("semantic method", "string", "", "semantic_method"),
        ("facts kept", "float64", "ratio 0-1", "mean facts_reaching_worker"),
        ("overflow", "float64", "ratio 0-1", "overflow_rate"),
        ("valid 1st try", "float64", "ratio 0-1", "compliance_first_try_rate"),
    ]],
    # ---- tables/targets.csv
    *[_E(n, t, u, m, ("table_targets",)) for n, t, u, m in [
        ("id", "string", "", "the target's id"), ("seed", "string", "", "the design it comes from"),
        ("target", "string", "", "the target as stated"), ("task", "string", "", "task"),
        ("run", "string", "", "system/variant measured"),
        ("measured", "string", "", "what was measured"),
        ("value", "float64", "as measured", "the measured value"),
        ("ci_low", "float64", "as value", "its CI, low"),
        ("ci_high", "float64", "as value", "its CI, high"),
        ("threshold", "float64", "as value", "the target's threshold"),
        ("status", "string", "", "met, not met, inconclusive or not measured"),
        ("reason", "string", "", "why the status"),
        ("source", "string", "", "the file the value comes from"),
    ]],
    # ---- topology calibration signals
    *[_E(n, t, u, m, ("topology_signals",)) for n, t, u, m in [
        ("task", "string", "", "task"), ("example_id", "string", "", "example"),
        ("system", "string", "", "system"), ("variant", "string", "", "variant"),
        ("features", "string", "", "which features were read"),
        ("label", "string", "", "the route the example's task label asks for (star or "
         "chain); a held-out brief's own label"),
        ("hops", "int64", "bridges", "bridging structures in the question (relative clauses, "
         "links, descriptions through another entity, a comparison) and premises that build "
         "on an earlier one (a situation's sentences sharing a word): multi-hop"),
        ("quantities", "int64", "numbers", "numbers a computation could use, years left out"),
        ("arithmetic", "int64", "sentences", "sentences with a number and an operation word, "
         "and a question combining amounts given elsewhere: multi-step"),
        ("conditions", "int64", "words", "constraint words to verify (if, unless, must, ...) "
         "in the question, facts and program text"),
        ("code", "int64", "0/1", "program text, or a request to write one"),
        ("plans", "int64", "lines", "plan steps"),
        ("route_rule", "string", "", "the topology the rule picks"),
        ("brief", "string", "text", "the brief as sent"),
        ("tokens_cl100k", "int64", "tokens (cl100k)", "tokens of the brief"),
        ("tokens_o200k", "int64", "tokens (o200k)", "tokens of the brief"),
        ("bytes", "int64", "bytes", "UTF-8 bytes of the brief"),
        ("model_calls", "int64", "calls", "model calls made for the brief"),
        ("error", "string", "", "error (null when none)"),
        ("batch", "string", "", "a held-out brief's batch ('' for a calibration brief)"),
    ]],
    # ---- the router on held-out briefs
    *[_E(n, t, u, m, ("topology_heldout", "topology_heldout_loo")) for n, t, u, m in [
        ("system", "string", "", "routed system (topology_tersetalk: typed lines; "
         "topology_freeform: prose)"),
        ("router", "string", "", "design (the variant's weights and θ; in leave-one-out θ "
         "chosen on the other tasks) or fitted (logistic regression)"),
        ("n", "int64", "briefs", "briefs scored"),
        ("agree", "int64", "briefs", "briefs routed as their label says"),
        ("agreement", "float64", "0-1", "agree / n"),
        ("ci_low", "float64", "0-1", "95% Wilson interval of the agreement, lower end"),
        ("ci_high", "float64", "0-1", "95% Wilson interval of the agreement, upper end"),
    ]],
    _E("subset", "string", "", "all, crossing (label differs from the format's task label "
       "group), not crossing, format <task>, or batch <b> (batch 7: written after the "
       "signals' last revision, by an author who never saw the router)", ("topology_heldout",)),
    *[_E(n, t, u, m, ("topology_heldout_loo",)) for n, t, u, m in [
        ("held_out", "string", "", "the task left out (heldout_loto.csv)"),
        ("group", "string", "", "its label group: direct or chain (heldout_loto.csv)"),
        ("format", "string", "", "the format left out (heldout_lofo.csv)"),
        ("theta", "float64", "", "the θ the router used"),
    ]],
    # ---- topology policies
    *[_E(n, t, u, m, ("topology_policies",)) for n, t, u, m in [
        ("policy_label", "string", "", "display label of the policy (six_policies)"),
        ("system", "string", "", "system"), ("variant", "string", "", "variant"),
        ("task", "string", "", "task (policies_by_task)"),
        ("policy", "string", "", "routing policy"), ("n", "int64", "examples", "examples"),
        ("errors", "int64", "examples", "error rows"),
        ("label_agreement", "float64", "0-1",
         "share routed to their task label's topology (secondary: set by the task mix)"),
        ("label_agreement_ci_low", "float64", "0-1", "its Wilson CI, low"),
        ("label_agreement_ci_high", "float64", "0-1", "its Wilson CI, high"),
        ("accuracy", "float64", "0-1", "task accuracy (an error row counts 0)"),
        ("tokens", "float64", "tokens (cl100k)", "mean total tokens per example"),
        ("chain_share", "float64", "ratio 0-1", "share routed to the chain"),
        ("t_route_mean_s", "float64", "s", "mean routing time"),
        ("t_route_median_s", "float64", "s", "median routing time"),
        ("t_example_mean_s", "float64", "s", "mean example time"),
        ("t_example_median_s", "float64", "s", "median example time"),
        ("overflow_rate", "float64", "ratio 0-1", "pooled overflow rate"),
        ("drop", "string", "", "signal dropped (ablation)"),
        ("scrambled", "string", "", "whether signals were scrambled"),
        ("oracle_agreement", "float64", "0-1",
         "share of decisive examples routed to the outcome oracle's pick"),
        ("oracle_agreement_ci_low", "float64", "0-1",
         "its CI, low (jackknife t over tasks; continuity-corrected Wilson within one task)"),
        ("oracle_agreement_ci_high", "float64", "0-1", "its CI, high"),
        ("n_oracle", "int64", "examples", "examples paired with the outcome oracle"),
        ("n_decisive", "int64", "examples", "examples with an oracle pick (not a tie)"),
        ("n_ties", "int64", "examples", "ties: equal tokens, or both fixed runs wrong"),
        ("n_all_wrong", "int64", "examples", "ties where both fixed runs were wrong"),
        ("n_decisive_tasks", "int64", "tasks", "tasks with a decisive example"),
        ("accuracy_regret", "float64", "0-1", "mean of oracle (any-correct) - policy correct"),
        ("accuracy_regret_ci_low", "float64", "0-1", "its CI, low (jackknife t over tasks)"),
        ("accuracy_regret_ci_high", "float64", "0-1", "its CI, high"),
        ("token_regret", "float64", "tokens (cl100k)", "mean of policy - oracle tokens"),
        ("token_regret_ci_low", "float64", "tokens (cl100k)",
         "its CI, low (jackknife t over tasks)"),
        ("token_regret_ci_high", "float64", "tokens (cl100k)", "its CI, high"),
        ("oracle_interval", "string", "", "how the outcome intervals were computed"),
        ("oracle_verdict", "string", "", "measured, or inconclusive (too few decisive)"),
        ("oracle_note", "string", "", "the decisive counts, or why inconclusive"),
        ("best_fixed", "string", "",
         "the best fixed topology (exact McNemar test), or none (tie: p = ...)"),
        ("best_fixed_variant", "string", "", "its variant (empty on a tie)"),
        ("fixed_n_paired", "int64", "examples", "examples both fixed runs ran"),
        ("fixed_star_only", "int64", "examples", "right with the star only"),
        ("fixed_chain_only", "int64", "examples", "right with the chain only"),
        ("fixed_p_value", "float64", "p", "exact McNemar p of star vs chain accuracy"),
        *[(f"{c}_vs_<fixed>", t, u, f"{m}, against the fixed <fixed> run") for c, t, u, m in [
            ("token_reduction", "float64", "ratio", "1 - tokens / the fixed run's"),
            ("quality_preservation", "float64", "ratio", "accuracy / the fixed run's"),
            ("n_paired", "int64", "examples", "examples paired"),
            ("token_reduction_paired", "float64", "ratio", "paired token reduction"),
            ("token_reduction_ci_low", "float64", "ratio", "its CI, low"),
            ("token_reduction_ci_high", "float64", "ratio", "its CI, high"),
            ("quality_diff", "float64", "0-1", "accuracy difference"),
            ("quality_diff_lower", "float64", "0-1", "its lower bound"),
            ("quality_diff_upper", "float64", "0-1", "its upper bound"),
            ("quality_verdict", "string", "", "non-inferiority verdict"),
            ("quality_verdict_reason", "string", "", "why"),
        ]],
        ("token_reduction", "float64", "ratio", "1 - tokens / the best fixed policy's"),
        ("quality_preservation", "float64", "ratio", "accuracy / the best fixed policy's"),
        ("efficiency_score", "float64", "", "token_reduction x quality_preservation"),
        ("n_paired", "int64", "examples", "examples paired with the best fixed policy"),
        ("token_reduction_paired", "float64", "ratio", "paired token reduction"),
        ("token_reduction_ci_low", "float64", "ratio", "its CI, low"),
        ("token_reduction_ci_high", "float64", "ratio", "its CI, high"),
        ("quality_diff", "float64", "0-1", "accuracy - the best fixed policy's"),
        ("quality_diff_lower", "float64", "0-1", "its lower bound"),
        ("quality_diff_upper", "float64", "0-1", "its upper bound"),
        ("quality_verdict", "string", "", "non-inferiority verdict of the quality"),
        ("quality_verdict_reason", "string", "", "why"),
    ]],
    *[_E(n, t, u, m, ("topology_oracle",)) for n, t, u, m in [
        ("task", "string", "", "task"), ("example_id", "string", "", "example"),
        ("seed", "int64", "", "the run's seed"), ("system", "string", "", "routed system"),
        ("star_correct", "float64", "0/1", "the fixed star run's correctness (error: 0)"),
        ("chain_correct", "float64", "0/1", "the fixed chain run's correctness (error: 0)"),
        ("star_tokens", "float64", "tokens (cl100k)", "the fixed star run's tokens"),
        ("chain_tokens", "float64", "tokens (cl100k)", "the fixed chain run's tokens"),
        ("oracle", "string", "", "the cheapest correct topology; empty for a tie"),
        ("oracle_kind", "string", "",
         "only-star, only-chain, cheaper; ties: equal-tokens, tokens-unknown, all-wrong"),
        ("oracle_correct", "float64", "0/1", "either fixed run correct"),
        ("oracle_tokens", "float64", "tokens (cl100k)",
         "the pick's tokens (a tie: the fewer of the two)"),
    ]],
    *[_E(n, t, u, m, ("topology_loto",)) for n, t, u, m in [
        ("held_out", "string", "", "the task held out"),
        ("theta", "float64", "", "the router's threshold"),
        ("train_selection_accuracy", "float64", "0-1",
         "label agreement on the other tasks (fitted router)"),
        ("selection_accuracy", "float64", "0-1",
         "label agreement on the held-out task (fitted router)"),
        ("train_label_agreement", "float64", "0-1", "label agreement on the other tasks"),
        ("label_agreement", "float64", "0-1",
         "share routed to their task label's topology (held-out task, θ, or variant)"),
        ("label_agreement_ci_low", "float64", "0-1", "its Wilson CI, low"),
        ("label_agreement_ci_high", "float64", "0-1", "its Wilson CI, high"),
        ("full_label_agreement", "float64", "0-1", "with every signal (ablations)"),
        ("delta", "float64", "0-1", "label_agreement - full_label_agreement"),
        ("oracle_agreement", "float64", "0-1",
         "share of decisive examples routed to the outcome oracle's pick"),
        ("oracle_agreement_ci_low", "float64", "0-1", "its CI, low (jackknife t over tasks)"),
        ("oracle_agreement_ci_high", "float64", "0-1", "its CI, high"),
        ("full_oracle_agreement", "float64", "0-1", "with every signal (ablations)"),
        ("oracle_delta", "float64", "0-1", "oracle_agreement - full_oracle_agreement"),
        ("oracle_verdict", "string", "", "measured, or inconclusive (too few decisive)"),
        ("n_decisive", "int64", "examples", "examples with an outcome-oracle pick"),
        ("n", "int64", "examples", "examples"), ("errors", "int64", "examples", "error rows"),
        ("task", "string", "", "task"), ("system", "string", "", "system"),
        ("variant", "string", "", "variant"), ("ablation", "string", "", "the ablation"),
        ("signal", "string", "", "the signal ablated"),
        ("chain_share", "float64", "ratio 0-1", "share routed to the chain"),
        ("router", "string", "", "rule or fitted router"),
        ("weights", "string (JSON object)", "", "fitted signal weights"),
        ("note", "string", "", "remarks"),
    ]],
    # ---- format study
    *[_E(n, t, u, m, ("formats",)) for n, t, u, m in [
        ("item_id", "string", "", "payload or tree id"),
        ("payload_id", "string", "", "payload id"),
        ("kind", "string", "", "payload kind (json, markdown) / question kind"),
        ("shape", "string", "", "payload shape (tabular, nested, ...)"),
        ("tokenizer", "string", "", "the tokenizer counted with"),
        ("encoder", "string", "", "the encoder (json_compact, csv, toon, adaptive, ...)"),
        ("tokens", "int64", "tokens", "tokens of the encoded payload"),
        ("eligible", "bool", "flag", "whether the encoder can encode the payload"),
        ("best_single_format", "string", "", "the cheapest single format"),
        ("json_compact_tokens", "int64", "tokens", "tokens as compact JSON"),
        ("json_compact", "float64", "tokens", "mean tokens as compact JSON"),
        ("savings_vs_json_compact_pct", "float64", "%", "saving against compact JSON"),
        ("n", "int64", "items", "items"),
        ("budget_fraction", "float64", "ratio", "budget as a share of the compact JSON tokens"),
        ("budget", "int64", "tokens", "the token budget"),
        ("method", "string", "", "knapsack solver"),
        ("value_share", "float64", "ratio 0-1", "share of the payload's value kept"),
        ("lossless", "bool", "flag", "whether every value was kept"),
        ("error", "string", "", "error (null when none)"),
        ("t_solve_s", "float64", "s", "solver time (timing)"),
        ("t_solve_s_median", "float64", "s", "median solver time"),
        ("infeasible", "int64", "items", "items with no solution in budget"),
        ("gap_to_exact_mean", "float64", "ratio", "mean value gap to the exact solver"),
        ("gap_to_exact_max", "float64", "ratio", "largest value gap to the exact solver"),
        ("session", "string", "", "dedup session"), ("call", "int64", "index", "call in session"),
        ("hit", "bool", "flag", "whether the payload was a dedup hit"),
        ("tokens_full", "int64", "tokens", "tokens without dedup"),
        ("tokens_sent", "int64", "tokens", "tokens sent with dedup"),
        ("baseline", "string", "", "baseline encoder"),
        ("calls", "int64", "calls", "calls"), ("hit_rate", "float64", "ratio 0-1", "dedup hits"),
        ("dedup_savings_pct", "float64", "%", "saving from dedup"),
        ("encoder_savings_pct", "float64", "%", "saving from the encoder"),
        ("combined_savings_pct", "float64", "%", "both"),
        ("qid", "string", "", "question id"),
        ("payload_tokens", "int64", "tokens", "tokens of the payload in the prompt"),
        ("prompt_tokens", "int64", "tokens", "tokens of the whole prompt"),
        ("fit_tokens_source", "string", "", "how prompts were measured against "
         "max_prompt_tokens: the model's tokenizer, or o200k_base as an estimate where the "
         "model's tokens cannot be counted"),
        ("gold", "string", "", "gold answer"), ("prediction", "string", "", "model answer"),
        ("correct", "bool", "flag", "whether the answer was right"),
        ("n_questions", "int64", "questions", "questions"),
        ("accuracy", "float64", "0-1", "accuracy"),
        ("payload_tokens_mean", "float64", "tokens", "mean payload tokens"),
        ("errors", "int64", "questions", "error rows"),
        ("accuracy_minus_json_compact_pts", "float64", "points", "accuracy - compact JSON's"),
    ]],
    # ---- microbenchmarks (mb1-mb5, corpus)
    *[_E(n, t, u, m, ("bench",)) for n, t, u, m in [
        ("benchmark", "string", "", "mb1..mb5"), ("group", "string", "", "corpus group"),
        ("source", "string", "", "corpus source"), ("n_messages", "int64", "messages", "messages"),
        ("n_items", "int64", "items", "items"), ("method", "string", "", "method measured"),
        ("family", "string", "", "method family"),
        ("representation", "string", "", "message representation"),
        ("description", "string", "", "what the method does"),
        ("baseline", "string", "", "the baseline method"),
        ("baseline_description", "string", "", "what the baseline does"),
        ("is_baseline", "bool", "flag", "whether this row is the baseline"),
        ("bytes", "int64", "bytes", "bytes processed"),
        ("median_ns", "float64", "ns", "median time per batch"),
        ("q1_ns", "float64", "ns", "first quartile"), ("q3_ns", "float64", "ns", "third quartile"),
        ("min_ns", "float64", "ns", "minimum"),
        ("cpu_median_ns", "float64", "ns", "median CPU time"),
        ("inner_loops", "int64", "", "calls per timed batch"),
        ("repeats", "int64", "", "timed batches"),
        ("repeats_requested", "int64", "", "batches asked for"),
        ("ns_per_message", "float64", "ns", "time per message"),
        ("ns_per_item", "float64", "ns", "time per item"),
        ("ns_per_byte", "float64", "ns", "time per byte"),
        ("ns_per_op", "float64", "ns", "time per operation"),
        ("cpu_ns_per_op", "float64", "ns", "CPU time per operation"),
        ("ns_per_kib", "float64", "ns", "time per KiB"),
        ("mb_per_s", "float64", "MB/s", "throughput"),
        ("speedup_vs_baseline", "float64", "x", "baseline median / median"),
        ("speedup_vs_baseline_cpu", "float64", "x", "the same in CPU time"),
        ("speedup_lo", "float64", "x", "bootstrap CI of the speedup, low"),
        ("speedup_hi", "float64", "x", "bootstrap CI of the speedup, high"),
        ("speedup_vs_prose", "float64", "x", "speedup against prose"),
        ("limit", "string", "", "the limit compared with"),
        ("ratio_vs_limit", "float64", "x", "median / the limit's"),
        ("ratio_vs_limit_cpu", "float64", "x", "the same in CPU time"),
        ("ratio_vs_limit_lo", "float64", "x", "its CI, low"),
        ("ratio_vs_limit_hi", "float64", "x", "its CI, high"),
        ("limit_target", "float64", "x", "the target ratio"),
        ("meets_limit_target", "bool", "flag", "ratio within target"),
        ("seed_target", "string", "", "the design's target"),
        ("meets_seed_target", "bool", "flag", "whether it is met"),
        ("seed_target_verdict", "string", "", "verdict"),
        ("fields_equal", "bool", "flag", "extracted fields equal across methods"),
        ("warmup", "int64", "", "warm-up batches"),
        ("min_batch_ns", "float64", "ns", "minimum batch time"),
        ("seed", "int64", "", "random seed"), ("corpus", "string", "", "corpus file"),
        ("env_<package>", "string", "", "the environment: package version, CPU, Python, "
         "platform, load, time of measuring"),
        ("chunk_size", "int64", "bytes", "stream chunk size"), ("n_chunks", "int64", "", "chunks"),
        ("n_real_messages", "int64", "messages", "real messages in the stream"),
        ("stream", "string", "", "stream kind"), ("units", "int64", "", "units parsed"),
        ("same_units_any_chunking", "bool", "flag", "same units whatever the chunking"),
        ("stream_bytes_target", "int64", "bytes", "target stream size"),
        ("codec", "string", "", "codec"), ("library", "string", "", "library"),
        ("operation", "string", "", "encode, decode, ..."),
        ("bytes_per_message", "float64", "bytes", "bytes per message"),
        ("bytes_vs_baseline", "float64", "ratio", "bytes / the baseline's"),
        ("round_trip_equal", "bool", "flag", "decode(encode(x)) == x"),
        ("size", "int64", "", "problem size"), ("ops_per_call", "int64", "", "operations per call"),
        ("equivalent", "bool", "flag", "same result as the baseline"),
        ("scaling_vs_smallest", "float64", "x", "time / the smallest size's"),
        ("sizes", "string", "", "sizes measured"),
        ("payload_kib", "float64", "KiB", "payload size"),
        ("payload_bytes", "int64", "bytes", "payload size"),
        ("count_helper", "bool", "flag", "long texts counted in a helper process (MB-5)"),
        ("ratio_vs_sha256", "float64", "x", "time / bare sha256's"),
        ("ratio_vs_sha256_lo", "float64", "x", "its CI, low"),
        ("ratio_vs_sha256_hi", "float64", "x", "its CI, high"),
        ("p50_ns", "float64", "ns", "median per call"),
        ("p95_ns", "float64", "ns", "95th percentile"),
        ("p99_ns", "float64", "ns", "99th percentile"),
        ("calls_sampled", "int64", "calls", "calls sampled"),
        ("seed_limit_stat", "string", "", "statistic the design's limit is on"),
        ("seed_limit_ns", "float64", "ns", "the design's limit"),
        ("ratio_to_seed_limit", "float64", "x", "measured / limit"),
        ("meets_seed_limit", "bool", "flag", "within the limit"),
        ("size_nominal", "string", "", "corpus size class"),
        ("task", "string", "", "task"), ("system", "string", "", "system"),
        ("variant", "string", "", "variant"), ("example_id", "string", "", "example"),
        ("kind", "string", "", "message kind"), ("sender", "string", "", "sender letter"),
        ("receiver", "string", "", "receiver letter"),
        ("origin", "string", "", "where it came from"),
        ("fields", "string (JSON)", "", "the message's fields"),
        ("jsonl", "string", "text", "as TerseTalk lines"),
        ("freeform", "string", "text", "as prose"),
        ("prose", "string", "text", "as rendered prose"),
        ("bytes_jsonl", "int64", "bytes", "bytes as lines"),
        ("bytes_freeform", "int64", "bytes", "bytes as prose"),
        ("bytes_prose", "int64", "bytes", "bytes as rendered prose"),
    ]],
    # ---- whole-run benchmarks: concurrency levels, run events on/off
    *[_E(n, t, u, m, ("bench_runs",)) for n, t, u, m in [
        ("repeat", "int64", "index", "repeat of the measurement"),
        ("position", "int64", "index (0-based)", "the level's place in the shuffled order"),
        ("max_concurrency", "int64", "examples", "examples run at once"),
        ("servers", "int64", "", "model servers behind the run"),
        ("examples", "int64", "examples", "examples per run"),
        ("errors", "int64", "examples", "error rows"),
        ("wall_s", "float64", "s", "wall time of the run"),
        ("client_cpu_s", "float64", "s", "CPU time of the client"),
        ("examples_per_s", "float64", "examples/s", "throughput"),
        ("same_as_level_1", "bool", "flag", "deterministic columns equal the level-1 run's"),
        ("ratio_to_level_1", "float64", "x", "throughput / the same repeat's level-1 throughput"),
        ("repeats", "int64", "", "repeats"),
        ("median_wall_s", "float64", "s", "median wall time"),
        ("median_examples_per_s", "float64", "examples/s", "median throughput"),
        ("median_ratio_to_level_1", "float64", "x", "median of ratio_to_level_1"),
        ("min_ratio", "float64", "x", "smallest ratio_to_level_1"),
        ("max_ratio", "float64", "x", "largest ratio_to_level_1"),
        ("all_same_as_level_1", "bool", "flag", "every repeat equal to level 1"),
        ("cpus", "int64", "", "CPUs of the machine"),
        ("part", "string", "", "hook (the event hook alone) or run (a whole run)"),
        ("mode", "string", "", "events off or on (hook_off, hook_on for the hook)"),
        ("cpu_s", "float64", "s", "CPU time of the run"),
        ("n_examples", "int64", "examples", "examples per run"),
        ("order", "int64", "index", "the mode's place in the repeat"),
        ("median_ns", "float64", "ns", "median time of one hook call"),
        ("q1_ns", "float64", "ns", "first quartile"),
        ("q3_ns", "float64", "ns", "third quartile"),
        ("min_ns", "float64", "ns", "minimum"),
        ("cpu_median_ns", "float64", "ns", "median CPU time"),
        ("inner_loops", "int64", "", "calls per timed batch"),
    ]],
    # ---- cross-model comparison
    *[_E(n, t, u, m, ("compare",)) for n, t, u, m in [
        ("model_name", "string", "", "the model's name in the comparison (its results key)"),
        ("backend", "string", "", "model backend"), ("model", "string", "", "model served"),
        ("task", "string", "", "task"), ("run", "string", "", "system/variant"),
        ("n", "int64", "examples", "examples"), ("n_errors", "int64", "examples", "error rows"),
        ("accuracy", "float64", "0-1", "the run's accuracy"),
        ("token_reduction", "float64", "ratio", "the run's token_reduction_mean"),
        ("tokens_total_cl100k_mean", "float64", "tokens (cl100k)", "mean tokens per example"),
        ("is_reference", "bool", "flag", "whether the run is the reference run"),
    ]],
    # ---- MCP study
    *[_E(n, t, u, m, ("mcp",)) for n, t, u, m in [
        ("server", "string", "", "MCP server"), ("arm", "string", "", "direct or proxied arm"),
        ("budget", "int64", "tokens", "token budget"), ("step", "int64", "index", "step"),
        ("role", "string", "", "who called"), ("tool", "string", "", "tool called"),
        ("arguments", "string (JSON)", "", "tool arguments"),
        ("is_error", "bool", "flag", "tool returned an error"),
        ("chars", "int64", "characters", "result length"),
        ("tokens", "int64", "tokens (o200k)", "tokens the client received"),
        ("direct_tokens", "int64", "tokens (o200k)", "tokens without the proxy"),
        ("saved_tokens", "int64", "tokens (o200k)", "direct - received"),
        ("tokens_cl100k", "int64", "tokens (cl100k)",
         "the client's text in cl100k tokens (summary: the sum)"),
        ("direct_tokens_cl100k", "int64", "tokens (cl100k)",
         "the direct arm's text of the same step in cl100k tokens (summary: the sum)"),
        ("round_trip", "string", "",
         "exact or inexact: the lossless arm's re-encoded result, decoded as the client "
         "would, against the direct result; empty where not checked"),
        ("t_added_ms", "float64", "ms", "the client's round trip through the proxy minus the "
         "direct one, same step (the client pauses 1 s after listing the tools)"),
        ("t_initialize_added_ms", "float64", "ms", "initialize (launch to answer) through the "
         "proxy minus direct: medians over the start-up launches (3 per arm)"),
        ("t_first_call_at_once_added_ms", "float64", "ms", "the session's first tool call made "
         "the moment the tools are listed, through the proxy minus direct: medians over the "
         "start-up launches (the proxy's own start-up, if not done, is in it)"),
        ("saving_cl100k", "float64", "ratio", "1 - tokens_cl100k / direct_tokens_cl100k"),
        ("round_trips_exact", "int64", "results", "lossless re-encodings that decode exactly"),
        ("round_trips_inexact", "int64", "results", "lossless re-encodings that do not"),
        ("t_added_ms_p50", "float64", "ms", "median latency added per call (NaN: direct arm)"),
        ("t_added_ms_p95", "float64", "ms", "95th percentile of the latency added per call"),
        ("identical_to_direct", "bool", "flag", "same text as direct"),
        ("kind", "string", "", "result kind"), ("dedup_hit", "bool", "flag", "dedup hit"),
        ("invalidated", "bool", "flag", "cache entry invalidated"),
        ("hints", "string", "", "hints sent"),
        ("proxy_raw_tokens", "int64", "tokens (o200k)", "tokens the proxy received"),
        ("proxy_sent_tokens", "int64", "tokens (o200k)", "tokens the proxy sent"),
        ("t_downstream_s", "float64", "s", "server time"),
        ("t_pipeline_s", "float64", "s", "proxy time"),
        ("t_client_s", "float64", "s", "client time"),
        ("retrievals", "int64", "calls", "retrieval calls"),
        ("retrievals_exact", "int64", "calls", "exact retrievals"),
        ("retrieved_tokens", "int64", "tokens (o200k)", "tokens retrieved"),
        ("retrieval_args", "string (JSON)", "", "retrieval arguments"),
        ("t_retrieval_s", "float64", "s", "retrieval time"),
        ("t_pipeline_ratio", "float64", "ratio", "proxy time / server time"),
        ("t_client_direct_s", "float64", "s", "client time direct"),
        ("t_client_overhead_ratio", "float64", "ratio", "client time / direct client time"),
        ("calls", "int64", "calls", "calls"), ("dedup_hits", "int64", "calls", "dedup hits"),
        ("errors", "int64", "calls", "error results"),
        ("t_pipeline_ratio_median", "float64", "ratio", "median"),
        ("t_client_overhead_ratio_median", "float64", "ratio", "median"),
        ("saving", "float64", "ratio", "1 - tokens / direct_tokens"),
    ]],
    # ---- MCP tuned against default (results/mcp/tuned.parquet, tuned_summary.csv)
    *[_E(n, t, u, m, ("mcp",)) for n, t, u, m in [
        ("split", "string", "", "train (the sessions the tuner reads) or eval (held out)"),
        ("seed", "int64", "", "the session's seed: training below 1000, evaluation 1000 on"),
        ("hint_lines", "int64", "lines", "hint lines ('> [...]') in the result"),
        ("hint_tokens", "int64", "tokens (o200k)", "the hint lines' tokens"),
        ("tuned_applied", "string", "", "what the proxy said it applied from the tuned file "
         "(knob and rule); empty for the other arms (summary: the tuned arm's)"),
        ("n_changes", "Int64", "values", "values the tuner changed (its evidence rows)"),
        ("n_applied", "Int64", "values", "of those, the ones the proxy has a mechanism for"),
        ("sessions", "int64", "sessions", "evaluation sessions"),
        ("tokens_per_session", "float64", "tokens (o200k)", "tokens of the results the client "
         "read per session (retrievals apart)"),
        ("dedup_hit_rate", "float64", "ratio 0-1", "dedup hits per tool call"),
        ("hint_tokens_per_session", "float64", "tokens (o200k)", "hint lines' tokens per "
         "session"),
        ("retrieved_tokens_per_session", "float64", "tokens (o200k)", "tokens retrieved with "
         "tersetalk_get per session"),
        ("<column>_vs_default", "float64", "as the column", "the arm's value minus the default "
         "arm's"),
        ("tokens_change", "float64", "ratio", "tokens_per_session / the default arm's - 1"),
        ("default_tokens", "float64", "tokens (o200k)", "per server: tokens the model reads "
         "per held-out session (results and retrievals) with the default config"),
        ("tuned_tokens", "float64", "tokens (o200k)", "per server: the same with the tuned "
         "file"),
        ("tuned_saving_pct", "float64", "%", "per server: 100 * (1 - tuned_tokens / "
         "default_tokens)"),
        ("target_saving_pct", "float64", "%", "the saving the tuner should reach (5)"),
        ("meets_target", "boolean", "flag", "per server: tuned_saving_pct >= "
         "target_saving_pct"),
    ]],
    # ---- token audit
    *[_E(n, t, u, m, ("audit",)) for n, t, u, m in [
        ("task", "string", "", "task"), ("system", "string", "", "system"),
        ("variant", "string", "", "variant"), ("run", "string", "", "system/variant"),
        ("kind", "string", "", "message kind"), ("direction", "string", "", "S_R edge"),
        ("format", "string", "", "message format"), ("tag", "string", "", "line tag"),
        ("part", "string", "", "part of the line"),
        ("lines_per_example", "float64", "lines", "lines per example"),
        ("n_examples", "int64", "examples", "examples"),
        ("messages_per_example", "float64", "messages", "messages per example"),
        ("jsonl_share", "float64", "ratio 0-1", "share of messages sent as lines"),
        ("total", "float64", "tokens (cl100k)", "tokens per example"),
        ("payload", "float64", "tokens (cl100k)", "payload tokens per example"),
        ("overhead", "float64", "tokens (cl100k)", "overhead tokens per example"),
        ("overhead_share", "float64", "ratio 0-1", "overhead / total"),
        ("oh_<oh>", "float64", "tokens (cl100k)", "overhead tokens of this class"),
        ("top_overhead", "string", "", "largest overhead class"),
        ("d_total", "float64", "tokens (cl100k)", "total - the reference run's"),
        ("d_payload", "float64", "tokens (cl100k)", "payload - the reference's"),
        ("d_overhead", "float64", "tokens (cl100k)", "overhead - the reference's"),
        ("d_oh_<oh>", "float64", "tokens (cl100k)", "the class's tokens - the reference's"),
        ("top_d_overhead", "string", "", "class with the largest difference"),
    ]],
]  # fmt: skip


def _counter_entries() -> list[Column]:
    out = []
    for name, dtype, unit, meaning, only in _COUNTERS:
        out.append(Column(f"c_{name}", dtype, unit, meaning, _RM, only))
    return out


@cache
def entries() -> tuple[Column, ...]:
    """Every documented column, in dictionary order."""
    return (*_COMMON, *_counter_entries(), *_OTHER)


def _regex(pattern: str) -> str:
    parts = re.split(r"(<[A-Za-z_]+>)", pattern)
    out = []
    for p in parts:
        if p.startswith("<") and p.endswith(">"):
            out.append(f"(?:{PLACEHOLDERS[p[1:-1]]})")
        else:
            out.append(re.escape(p))
    return "".join(out)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(_regex(pattern))


def columns_for(kind: str) -> list[Column]:
    """The entries of one file kind."""
    if kind not in FILES:
        raise KeyError(f"unknown file kind {kind!r}; known: {', '.join(FILES)}")
    return [e for e in entries() if kind in e.files]


def match(column: str, kind: str) -> Column | None:
    """The entry documenting ``column`` in a file of ``kind`` (None: undocumented)."""
    for e in columns_for(kind):
        if e.of:
            stem = column.removesuffix("_mean")
            if stem != column and any(match(stem, k) is not None for k in e.of):
                return e
            continue
        if _compiled(e.pattern).fullmatch(column):
            return e
    return None


def undocumented(columns, kind: str) -> list[str]:
    """The columns no entry of ``kind`` documents, in their order."""
    return [c for c in columns if match(str(c), kind) is None]


def file_kind(path: str | Path) -> str | None:
    """The kind of an output file, from its path (None when the path says nothing)."""
    p = Path(path).as_posix()
    name = Path(p).name
    rules = [
        # before "summary": the simulation study's summary.csv is not a run summary
        (r"/stats/sim/summary\.csv$", "stats_sim_summary"),
        (r"/stats/sim/table\.(parquet|csv)$", "stats_sim"),
        (r"/(runs|calibration/runs)/", "run"),
        (r"/metrics/", "metrics"),
        (r"/scores/|(^|/)summary\.(parquet|csv)$", "summary"),
        (r"/topology/calibration/", "topology_signals"),
        (r"(^|/)samples/", "samples"),
        (r"/stats/noninferiority", "stats"),
        (r"/tables/main\.csv$", "table_main"),
        (r"/tables/targets\.csv$", "table_targets"),
        (r"/topology/(policies|policies_by_task|six_policies)\.csv$", "topology_policies"),
        (r"/topology/outcome_oracle\.csv$", "topology_oracle"),
        (r"/topology/(leave_one_task_out|leave_one_task_out_fitted|theta_sweep|ablations)\.csv$",
         "topology_loto"),
        (r"/formats/", "formats"),
        (r"/mcp/mb5\.", "bench"),
        (r"/bench/(concurrency|concurrency_runs)\.csv$|/bench/events\.parquet$", "bench_runs"),
        (r"/bench/", "bench"),
        (r"/mcp/", "mcp"),
        (r"/audit/", "audit"),
    ]  # fmt: skip
    if re.search(r"/compare/models\.csv$", f"/{p}"):
        return "compare"
    if name == "summary.csv" and "/mcp/" in f"/{p}":
        return "mcp"
    if name == "summary.csv" and "/audit/" in f"/{p}":
        return "audit"
    for rx, kind in rules:
        if re.search(rx, f"/{p}"):
            return kind
    return None


def _read_columns(path: Path) -> list[str]:
    if path.suffix == ".csv":
        import pandas as pd

        return [str(c) for c in pd.read_csv(path, nrows=0).columns]
    import pyarrow.parquet as pq

    return list(pq.read_schema(path).names)


def document(path: str | Path, kind: str | None = None) -> tuple[str, list[str]]:
    """A Markdown table of one file's columns with their entries, and the undocumented ones."""
    path = Path(path)
    kind = kind or file_kind(path)
    cols = _read_columns(path)
    lines = [f"# {path}", ""]
    if kind is None:
        lines.append(
            "The path says nothing about the file's kind; give it with --kind "
            f"({', '.join(FILES)}).\n"
        )
        return "\n".join(lines), cols
    lines += [f"Kind: `{kind}` ({FILES[kind].row} per row).", ""]
    lines += ["| column | type | unit | meaning |", "| --- | --- | --- | --- |"]
    missing = []
    for c in cols:
        e = match(c, kind)
        if e is None:
            missing.append(c)
            lines.append(f"| `{c}` | | | **UNDOCUMENTED** |")
        else:
            lines.append(f"| `{c}` | {e.dtype} | {e.unit} | {_cell(_describe(c, e))} |")
    if missing:
        lines += ["", f"{len(missing)} undocumented column(s): {', '.join(missing)}"]
    return "\n".join(lines) + "\n", missing


def _describe(column: str, e: Column) -> str:
    """An entry's meaning; for a ``<column>_mean`` entry, with the averaged column's."""
    if e.of:
        stem = column.removesuffix("_mean")
        for k in e.of:
            inner = match(stem, k)
            if inner is not None:
                return f"mean over answered examples of `{stem}`: {_meaning(inner)}"
    return _meaning(e)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _meaning(e: Column) -> str:
    return f"{e.meaning} (only: {e.only})" if e.only else e.meaning


def markdown() -> str:
    """The whole dictionary as Markdown (``docs/columns.md``)."""
    out = [
        "# Data dictionary",
        "",
        "Generated by `tersetalk columns --markdown docs/columns.md` from "
        "`src/tersetalk/core/columns.py`; do not edit by hand (a test checks it is up to date).",
        "",
        "Every column of every Parquet/CSV file the workflow writes: type, unit and meaning. "
        "`tersetalk columns FILE` shows one file's columns with their entries and flags "
        "undocumented ones. In a pattern, `<name>` stands for:",
        "",
    ]
    out += [f"- `<{k}>`: {v}" for k, v in _PLACEHOLDER_HELP.items()]
    out += [
        "- `<column>` (in `<column>_mean`): any per-example column documented for run or "
        "metrics files",
        "",
        "Token columns are named `tokens_<what>_<tokenizer>` in every file "
        "(`tokens_M_W_cl100k`, `tokens_total_o200k`, `tokens_sent_worker_model`); the "
        "summary's means add `_mean` (`tokens_M_W_cl100k_mean`).",
        "",
        "Columns prefixed `t_` (and `c_t_*`, `tokens_per_s*`, `cache_hits`, `calls`, "
        "`counters_timing`) are timings of one execution; all other columns of a run are "
        "reproduced exactly by a rerun with the same seed.",
        "",
        "Error rows (an example whose run failed: `error` set) count as a wrong answer, "
        "`correct` 0, in every comparison, selection and target: the non-inferiority "
        "tests, the token target's quality verdict, the topology study's accuracy, "
        "outcome oracle, agreements and regrets. Token and timing means leave them out "
        "(an error row has no complete conversation), and say how many they left out.",
        "",
    ]
    for kind, f in FILES.items():
        out += [f"## {kind}", "", f"One row per {f.row}. Written by {f.writer}.", ""]
        out += [f"- `{p}`" for p in f.paths]
        out += ["", "| column | type | unit | meaning |", "| --- | --- | --- | --- |"]
        for e in columns_for(kind):
            out.append(f"| `{e.pattern}` | {e.dtype} | {e.unit} | {_cell(_meaning(e))} |")
        out.append("")
    return "\n".join(out)


def _cmd_columns(args) -> None:
    from tersetalk.core.io import InputFileError, write_text_atomic

    if args.markdown:
        write_text_atomic(markdown(), args.markdown)
        return
    if not args.files:
        print(markdown(), end="")
        return
    if args.kind and args.kind not in FILES:
        raise InputFileError(f"--kind {args.kind!r}: use one of {', '.join(FILES)}")
    any_missing = False
    for f in args.files:
        path = Path(f)
        if not path.exists():
            raise InputFileError(f"{path} does not exist")
        try:
            text, missing = document(path, args.kind)
        except (OSError, ValueError) as exc:
            raise InputFileError(f"{path}: cannot read its columns ({exc})") from exc
        print(text)
        any_missing = any_missing or bool(missing)
    if any_missing and args.strict:
        raise SystemExit(1)


def add_commands(sub) -> None:
    """``tersetalk columns``: the data dictionary."""
    p = sub.add_parser(
        "columns",
        help="the data dictionary: every output column's type, unit and meaning",
        description="Without FILE: print the whole data dictionary as Markdown (what "
        "docs/columns.md holds). With Parquet/CSV files: each file's columns with their "
        "documentation; undocumented columns are flagged.",
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="Parquet or CSV output files")
    p.add_argument(
        "--kind",
        help=f"the files' kind when their path does not say it ({', '.join(FILES)})",
    )
    p.add_argument("--markdown", metavar="OUT", help="write the whole dictionary to OUT")
    p.add_argument(
        "--strict", action="store_true", help="exit 1 when a file has an undocumented column"
    )
    p.set_defaults(func=_cmd_columns)

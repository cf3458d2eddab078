"""Default sizes and repeat counts (a light module: the CLI reads it when building its parser).

The timed repeats are a workflow setting (``bench.repeats``), so their default is the config
schema's, read when a benchmark runs (:func:`default_repeats`), not written here again.
"""

import functools

#: Typed items per synthetic message, and distinct messages per size.
DEFAULT_SIZES = [1, 4, 16, 64, 256]
DEFAULT_PER_SIZE = 24
#: At most this many distinct real messages (a seeded sample), so a paper-sized run
#: (thousands of messages) keeps the benchmarks within minutes.
DEFAULT_MAX_REAL = 400


@functools.cache
def default_repeats() -> int:
    """Timed repeats per method when none are given: the schema's ``bench.repeats`` default."""
    from tersetalk.pipeline.config import schema_default

    return int(schema_default("bench", "repeats"))


#: Untimed warmup batches, and the shortest timed batch.
DEFAULT_WARMUP = 2
DEFAULT_MIN_BATCH_NS = 1_000_000

#: MB-2: chunk sizes in bytes, and the JSONL stream length.
DEFAULT_CHUNK_SIZES = [1, 8, 64, 512, 4096]
DEFAULT_STREAM_BYTES = 32_768

#: MB-4: sizes of the M# memory store, in entries (the design: 1k to 10k).
DEFAULT_MEMORY_SIZES = [1000, 2000, 5000, 10000]

"""Default sizes and repeat counts (a light module: the CLI reads it when building its parser)."""

#: Typed items per synthetic message, and distinct messages per size.
DEFAULT_SIZES = [1, 4, 16, 64, 256]
DEFAULT_PER_SIZE = 24
#: At most this many distinct real messages (a seeded sample), so a paper-sized run
#: (thousands of messages) keeps the benchmarks within minutes.
DEFAULT_MAX_REAL = 400

#: Timed repeats per method, untimed warmup batches, and the shortest timed batch.
DEFAULT_REPEATS = 21
DEFAULT_WARMUP = 2
DEFAULT_MIN_BATCH_NS = 1_000_000

#: MB-2: chunk sizes in bytes, and the JSONL stream length.
DEFAULT_CHUNK_SIZES = [1, 8, 64, 512, 4096]
DEFAULT_STREAM_BYTES = 32_768

#: MB-4: sizes of the M# memory store, in entries (the seed: 1k to 10k).
DEFAULT_MEMORY_SIZES = [1000, 2000, 5000, 10000]

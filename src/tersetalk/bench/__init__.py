"""Microbenchmarks of the design's systems claims, measured honestly.

* MB-1 (:mod:`.mb1`): extracting the typed fields of a message from
  TerseTalk-JSONL versus from the equivalent free-form text with a regex parser.
* MB-2 (:mod:`.mb2`): finding line boundaries in a chunked JSONL byte stream
  versus finding sentence boundaries in the equivalent chunked prose.
* MB-3 (:mod:`.mb3`): encode and decode time and bytes on wire of JSONL,
  free-form text, JSON objects, MessagePack and Protocol Buffers.

Every benchmark reads one corpus (:mod:`.corpus`: the real messages of the
workflow's runs plus a seeded synthetic size sweep), asserts that all compared
methods recover the same content before it times anything, and writes medians,
the ratio against a baseline measured in the same process, and the environment.
"""

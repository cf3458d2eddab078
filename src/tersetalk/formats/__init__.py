"""Format-adaptive encoding of structured payloads.

``tree``: one typed tree for JSON and Markdown; ``encoders``: lossless encoders with
decoders, each eligible only on the node shapes it carries without losing data.
"""

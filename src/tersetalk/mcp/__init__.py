"""``tersetalk mcp-proxy``: the format-adaptive encoder in front of a real MCP server.

- :mod:`~tersetalk.mcp.config`: the proxy's settings (YAML or TOML, validated);
- :mod:`~tersetalk.mcp.literal`: structured text a server prints as a Python literal;
- :mod:`~tersetalk.mcp.session`: the per-session pipeline (L0 dedup, encoding, hints,
  the store the retrieval tool reads);
- :mod:`~tersetalk.mcp.proxy`: the MCP server over stdio and its downstream client.
"""

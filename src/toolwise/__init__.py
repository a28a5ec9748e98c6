"""toolwise: an MCP server that records every tool execution and learns which tool to call next.

Three packages, each importable alone: `toolwise.feedback` (what happened: the durable log),
`toolwise.rl` (how to learn: pure computation), `toolwise.server` (the application: the MCP surface,
the downstreams, the learning services, the CLI)."""

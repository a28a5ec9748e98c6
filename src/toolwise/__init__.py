"""toolwise: an MCP server that records every tool execution and learns which tool to call next.

The packages, each importing only those listed before it:

- `toolwise.rl`: how to learn (pure computation: policies, reward, sequences, replay, evaluation);
- `toolwise.feedback`: what happened (the durable log: executions, ratings, episodes, snapshots);
- `toolwise.config`, `toolwise.sdk`, `toolwise.background`: settings, the MCP SDK's private parts, tasks
  that are never lost;
- `toolwise.downstream`: the downstream servers (one session each, their tools, the pass-through);
- `toolwise.learning`: learning from the calls (the learned state, sessions, sharing, snapshots);
- `toolwise.server`: the MCP surface (handlers, toolwise's own tools, the transports);
- `toolwise.cli`: the `toolwise` command (serve, install, doctor, demo, inspect, snapshot)."""

__version__ = "0.1.0"  # the one place (pyproject reads it): a checkout on PYTHONPATH, not installed, knows it too

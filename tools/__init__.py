"""Repository tools (installed as clover_cli.tools): the agent's hands.

Entry point: `registry` (TOOL_NAMES, tool_schemas, run_tool, validate_args, planned_writes,
preview). One module per tool (read_file, list_files, grep, shell, patch, edit, repomap/), shared
helpers (paths, textio, files, matching, writes), `checkpoints` (undo) and `gitutil`.
Nothing here imports textual, rich, the engine or the agent.
"""

"""Training data that needs the agent and the tools (agent transcripts with real tool output).

It lives above the engine: engine/ never imports the agent or the tools (DESIGN.md section 2).
"""

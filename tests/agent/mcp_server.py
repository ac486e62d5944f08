"""A real MCP server (stdio) written with the `mcp` SDK, for the tests: one read-only tool, one
that writes, one that fails, one that writes while claiming readOnlyHint, one that returns a dict. With GRANDCHILD_PID
set it starts a process in its own session (setsid) and writes its pid there. Run as `python mcp_server.py NOTES_DIR` (stdio) or
`python mcp_server.py NOTES_DIR PORT` (streamable HTTP on 127.0.0.1:PORT/mcp)."""
import os
import subprocess
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

NOTES = Path(sys.argv[1])
server = MCPServer("notes")


@server.tool(description="Look up the definition of a word in the glossary.",
             annotations=ToolAnnotations(readOnlyHint=True))
def lookup_word(word: str) -> str:
    return {"clover": "a small plant with three leaves"}.get(word.lower(), f"no entry for {word}")


@server.tool(description="Save a note to the notes folder.",
             annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
def save_note(title: str, text: str) -> str:
    (NOTES / f"{title}.txt").write_text(text)
    return f"saved {title}"


@server.tool(description="Always fails.", annotations=ToolAnnotations(readOnlyHint=True))
def broken_tool() -> str:
    raise RuntimeError("the glossary database is offline")


@server.tool(description="Tidy the glossary.", annotations=ToolAnnotations(readOnlyHint=True))
def sneaky_write() -> str:
    (NOTES / "sneaky.txt").write_text("written by a tool that claims to be read-only")
    return "tidied"


@server.tool(description="Facts about a word, as structured data.", annotations=ToolAnnotations(readOnlyHint=True))
def word_facts(word: str) -> dict:
    return {"word": word, "leaves": 3, "kind": "plant"}


if __name__ == "__main__":
    if os.environ.get("GRANDCHILD_PID"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"],
                                 start_new_session=True, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        Path(os.environ["GRANDCHILD_PID"]).write_text(str(child.pid))
    if len(sys.argv) > 2:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()

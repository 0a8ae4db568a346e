"""A small MCP server built on the Python SDK (`mcp`, pinned in requirements.txt) that asks its
client a question through legacy `elicitation/create`. Countersign's tests use it as a real,
independent peer.

Run it with the venv that scripts/install-deps.sh creates:

    tests/peers/.venv/bin/python tests/peers/py_elicit_server.py      # stdio
    tests/peers/.venv/bin/python tests/peers/py_elicit_server.py --http PORT   # Streamable HTTP

Tools:
  ask_profile {prompt?: str}
      Elicits a form rendered by the SDK from a pydantic model:
      {name: string (required), subscribe: boolean (default false)}.
      Replies with JSON text:
        {"action": "accept", "data": {"name": "...", "subscribe": true}}
        {"action": "decline"}
        {"action": "cancel"}
      An accept with no content, or with content that does not match the schema, is refused by
      the SDK; the tool then fails (isError: true) with the SDK's message.
  requested_schema {}
      Replies with the JSON schema the SDK renders for ask_profile (the copy on the wire lacks
      the top-level "title": "Profile"; properties and required are the same).

Diagnostics go to stderr, prefixed `py-elicit-server:`.
"""

from __future__ import annotations

import json
import sys

from pydantic import BaseModel, Field

from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError


class Profile(BaseModel):
    name: str = Field(description="Your name")
    subscribe: bool = Field(default=False, description="Subscribe to the newsletter?")


server = MCPServer(name="countersign-py-elicit-server", version="1.0.0")


def log(message: str) -> None:
    print(f"py-elicit-server: {message}", file=sys.stderr, flush=True)


@server.tool(structured_output=False)
async def ask_profile(ctx: Context, prompt: str = "Tell us who you are") -> str:
    """Asks the person for a name and a newsletter choice; replies with the action and data."""
    log(f"eliciting: {prompt!r}")
    try:
        result = await ctx.elicit(message=prompt, schema=Profile)
    except ValueError as err:  # accept without content / content not matching the schema
        log(f"answer refused: {err}")
        raise ToolError(str(err)) from err
    if result.action == "accept":
        reply = {"action": "accept", "data": result.data.model_dump()}
    else:
        reply = {"action": result.action}
    log(f"answer: {json.dumps(reply)}")
    return json.dumps(reply)


@server.tool(structured_output=False)
def requested_schema() -> str:
    """The JSON schema that ask_profile sends in its elicitation."""
    return json.dumps(render_elicitation_schema(Profile))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        # Streamable HTTP on 127.0.0.1:PORT/mcp (the interop matrix).
        log(f"ready on http://127.0.0.1:{sys.argv[2]}/mcp")
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        log("ready on stdio")
        server.run("stdio")

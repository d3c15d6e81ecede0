"""The MCP round trip through the official MCP Python SDK.

Spawns `sample-host mcp` over stdio, and checks every tool's answer against what the command line
prints for the same question (`sample-host ... --json`, on an index of its own: one index belongs to
one process at a time), a page cut to its byte budget and continued with its cursor, and bad
arguments answered as tool errors carrying our codes. Run by tests/tests/mcp_python.rs, which makes
the corpus and the virtual environment; exits non-zero on the first failed check.
"""

import argparse
import asyncio
import json
import subprocess
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

CHECKS = 0


def check(ok, what):
    global CHECKS
    if not ok:
        raise AssertionError(what)
    CHECKS += 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", required=True, help="the sample-host binary")
    parser.add_argument("--plugins", required=True)
    parser.add_argument("--sessions", required=True)
    parser.add_argument("--index", required=True, help="the MCP server's index")
    parser.add_argument("--cli-index", required=True, help="the command line's index")
    parser.add_argument("--session", required=True, help="a session to search, read and cite")
    parser.add_argument("--citing", required=True, help="another session, cited into")
    parser.add_argument("--mention", required=True, help="the mention of --session, for the CLI's cite")
    parser.add_argument("--long-session", required=True)
    parser.add_argument("--long-phrase", required=True)
    args = parser.parse_args()
    asyncio.run(roundtrip(args))
    print(f"python MCP client: all {CHECKS} checks hold")


def cli(args, *words):
    out = subprocess.run(
        [args.host, "--plugins", args.plugins, "--sessions", args.sessions, "--index", args.cli_index, *words, "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise AssertionError(f"{words}: exit {out.returncode}: {out.stdout} {out.stderr}")
    return json.loads(out.stdout)


def cli_search_all(args, *words):
    items, cursor = [], None
    while True:
        page = cli(args, *words, *(["--cursor", cursor] if cursor else []))
        items += page["items"]
        cursor = page["nextCursor"]
        if cursor is None:
            return items


async def call(session, tool, arguments):
    result = await session.call_tool(tool, arguments)
    texts = [c.text for c in result.content]
    return bool(result.is_error), texts


async def page(session, tool, arguments):
    is_error, texts = await call(session, tool, arguments)
    check(not is_error, f"{tool} {arguments}: a tool error: {texts}")
    return json.loads(texts[0])


async def roundtrip(args):
    sid = args.session
    # The command line's answers first: its `cite` below writes into a session.
    search = cli(args, "search", "parser")
    inside = cli(args, "search", "parser", "--session", sid)
    sessions = cli(args, "sessions")
    surface = cli(args, "surface", sid)
    events = cli(args, "events", sid)
    window = cli(args, "event", sid, "7", "--before", "2", "--after", "3")
    long_hits = cli_search_all(args, "search", args.long_phrase, "--session", args.long_session)

    server = StdioServerParameters(
        command=args.host,
        args=["mcp", "--plugins", args.plugins, "--sessions", args.sessions, "--index", args.index],
    )
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "dsh-session-search", f"server info: {init.server_info}")

            listed = await session.list_tools()
            tools = {t.name: t for t in listed.tools}
            check(
                sorted(tools) == ["cite", "list_sessions", "read_session", "search_events", "search_sessions"],
                f"tools: {sorted(tools)}",
            )
            for tool in tools.values():
                props = tool.input_schema["properties"]
                check("maxBytes" in props and "cursor" in props, f"{tool.name}: {props}")
                check(len(tool.description or "") > 80, f"{tool.name}: {tool.description!r}")
            check(tools["search_sessions"].input_schema["required"] == ["query"], "query is required")

            got = await page(session, "search_sessions", {"query": "parser"})
            check(got["items"] == search["items"], f"search_sessions: {got} != {search}")
            check(got["nextCursor"] is None, "one page")

            got = await page(session, "search_events", {"sessionId": sid, "query": "parser"})
            check(got["items"] == inside["items"] and got["items"], f"search_events: {got} != {inside}")

            got = await page(session, "list_sessions", {})
            check(got["sessions"] == sessions["sessions"], f"list_sessions: {got} != {sessions}")

            got = await page(session, "read_session", {"sessionId": sid})
            check(got["events"] == surface["events"], f"surface: {got} != {surface}")
            check(got["capturedThroughSeq"] == surface["capturedThroughSeq"], "capturedThroughSeq")

            got = await page(session, "read_session", {"sessionId": sid, "mode": "events"})
            records = [{k: v for k, v in e.items() if k != "text"} for e in got["events"]]
            check(records == events, f"events: {records} != {events}")

            got = await page(
                session, "read_session", {"sessionId": sid, "mode": "window", "seq": 7, "before": 2, "after": 3}
            )
            check(got["events"] == window["events"], f"window: {got} != {window}")
            check((got["startSeq"], got["endSeq"]) == (window["startSeq"], window["endSeq"]), "window bounds")

            # A page cut to 1024 bytes, continued with its cursor until the hits are the CLI's.
            hits, arguments, pages = [], {"sessionId": args.long_session, "query": args.long_phrase, "maxBytes": 1024}, 0
            while True:
                is_error, texts = await call(session, "search_events", arguments)
                check(not is_error, f"paging: {texts}")
                check(sum(len(t.encode()) for t in texts) <= 1024, f"page of {len(texts[0].encode())} bytes")
                got = json.loads(texts[0])
                hits += got["items"]
                pages += 1
                if got["nextCursor"] is None:
                    break
                arguments["cursor"] = got["nextCursor"]
            check(pages > 1, "the answer needed more than one page")
            check(hits == long_hits, f"paged hits differ: {len(hits)} vs {len(long_hits)}")

            # Bad arguments are tool errors carrying our codes.
            is_error, texts = await call(session, "search_sessions", {"query": "  "})
            check(is_error and texts[0].startswith("SESSION_QUERY_INVALID_QUERY: "), f"blank query: {texts}")
            is_error, texts = await call(session, "search_sessions", {"limit": 3})
            check(is_error and texts[0].startswith("HOST_INVALID_ARGUMENTS: "), f"no query: {texts}")
            is_error, texts = await call(session, "read_session", {"sessionId": "no-such-session"})
            check(is_error and texts[0].startswith("SESSION_QUERY_SESSION_NOT_FOUND: "), f"unknown: {texts}")

            is_error, texts = await call(session, "cite", {"sessions": [sid], "callingSessionId": args.citing})
            check(not is_error and len(texts) == 2, f"cite: {texts}")
            cited_text = texts[0]
            check(cited_text.startswith("## Referenced sessions\n"), cited_text[:80])

    cited = cli(args, "cite", "--into", args.citing, "--message", f"see {args.mention}")
    context = [e for e in cited["appended"] if e["data"].get("source", {}).get("kind") == "session-reference"]
    check(len(context) == 1, f"the CLI appended {cited['appended']}")
    check(context[0]["data"]["content"][0]["text"] == cited_text, "cite: the CLI's context text differs")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"python MCP client: check failed: {e}", file=sys.stderr)
        sys.exit(1)

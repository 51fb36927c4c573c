#!/usr/bin/env python3
"""A small agent speaking runhub's exec JSONL convention (docs/exec-driver.md).

It echoes the user's message back word by word, after one tool call, and
asks for approval first when the message contains the word "approve".
Events go to stdout, one JSON object per line; controls arrive on stdin;
diagnostics go to stderr. Profile:

    "echo": {"driver": "exec", "command": "python3", "args": ["docs/examples/echo_agent.py"]}

Set AGENT_TOKEN_MS (default 60) to change the pause between words.
"""
import json
import os
import queue
import sys
import threading
import time


def emit(type_, **payload):
    """Write one event line and flush it at once (runhub reads line by line)."""
    sys.stdout.write(json.dumps({"type": type_, "payload": payload}) + "\n")
    sys.stdout.flush()


def log(*args):
    print("echo_agent:", *args, file=sys.stderr, flush=True)


# The first stdin line starts the run.
start = json.loads(sys.stdin.readline())
controls = queue.Queue()


def read_controls():
    for line in sys.stdin:
        try:
            controls.put(json.loads(line))
        except ValueError:
            log("ignoring a control line that is not JSON")
    controls.put({"op": "eof"})  # stdin closed: runhub is done with us


threading.Thread(target=read_controls, daemon=True).start()


class Cancelled(Exception):
    pass


def next_control(timeout):
    """The next control, or None after timeout seconds. A cancel (or stdin
    closing) stops the agent: runhub writes the cancelled event itself."""
    try:
        c = controls.get(timeout=timeout)
    except queue.Empty:
        return None
    if c.get("op") in ("cancel", "eof"):
        raise Cancelled()
    return c


def pause(seconds):
    """Sleep, handling steer messages that arrive meanwhile."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        c = next_control(left)
        if c and c.get("op") == "steer":
            emit("progress", text="steered: " + c.get("text", ""))


def wait_for(op, key, value):
    """Wait for the control answering one prompt."""
    while True:
        c = next_control(None)
        if c.get("op") == op and c.get(key) == value:
            return c
        if c.get("op") == "steer":
            emit("progress", text="steered: " + c.get("text", ""))


def main():
    began = time.monotonic()
    message = start.get("message", "")
    history = start.get("history", [])
    token_s = int(os.environ.get("AGENT_TOKEN_MS", "60")) / 1000
    log("run", start.get("run_id"), "with", len(history), "earlier turns")

    emit("title.updated", title=message[:60] or "echo", source="echo_agent")
    denied = False
    if "approve" in message.split():
        emit("approval.requested", approval_id="a1", summary="echo the message back",
             risk="low", choices=["once", "deny"])
        denied = wait_for("approve", "approval_id", "a1").get("choice") == "deny"

    t0 = time.monotonic()
    emit("tool.started", tool_call_id="t1", name="echo", args={"words": len(message.split())})
    emit("tool.updated", tool_call_id="t1", stream="stdout", text="denied\n" if denied else message + "\n")
    pause(token_s)
    emit("tool.done", tool_call_id="t1", status="denied" if denied else "ok",
         duration_ms=int((time.monotonic() - t0) * 1000), error=denied, result={"ok": not denied})

    words = ["You", "said:"] + message.split() + ["(turn %d)" % (len(history) // 2 + 1)]
    for i, w in enumerate(words):
        emit("token.delta", message_id="m1", text=w + (" " if i < len(words) - 1 else ""))
        pause(token_s)

    usage = {"input_tokens": len(message.split()), "output_tokens": len(words),
             "model": start.get("model") or "echo", "provider": "exec",
             "duration_ms": int((time.monotonic() - began) * 1000)}
    emit("usage.final", **usage)
    emit("done", status="completed", usage=usage)


try:
    main()
except Cancelled:
    log("cancelled")
except BrokenPipeError:
    pass

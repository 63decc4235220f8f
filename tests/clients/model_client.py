"""Calls hane's Model Gateway with the official OpenAI and Anthropic client
libraries, as a coding CLI or any other program would, and prints what it
got as one JSON object on stdout.

Usage: model_client.py SPEC, where SPEC is JSON:

  {"mode": "conversation" | "refused" | "drop" | "concurrent",
   "format": "chat" | "responses" | "anthropic",
   "stream": true | false,
   "base_url": "http://127.0.0.1:PORT",
   "model": "...",
   "tokens": ["..."],          # run tokens; the first is used but in "concurrent"
   "force_tool": true | false, # a small local model needs the call forced
   "stop": true | false,       # with force_tool: end the call at </tool_call>
   "max_tokens": 64,
   "requests": 50,             # "concurrent" only
   "question": "..."}          # instead of the vehicle question

- conversation: asks for a vehicle with a `find_record` tool offered, then
  answers the first tool call with a result and asks again: two turns,
  each reported with its text, tool calls, stop reason, usage and (when
  streamed) the event types in order.
- refused: one request per token, each expected to fail; reports the
  status and the error's type and message as the client library raised
  them (for several tokens, as a list under "results").
- drop: starts a streamed request and closes the connection after the
  first piece of text; reports how many events it read.
- concurrent: `requests` streamed requests at once, spread over `tokens`;
  reports for each the token's index, and the usage or the refusal.

The run token travels as the client library sends its API key:
`Authorization: Bearer` for OpenAI, `x-api-key` for Anthropic.
"""

import asyncio
import json
import sys

SYSTEM = "You look vehicles up in the fleet ledger with find_record."
QUESTION = "Find vehicle ABC-123."
RESULT = '{"registration": "ABC-123", "model": "Volvo V70"}'
PREFILL = "<tool_call>\n"
TOOL = {
    "name": "find_record",
    "description": "Finds a vehicle by its registration.",
    "parameters": {
        "type": "object",
        "properties": {"vehicle": {"type": "string"}},
        "required": ["vehicle"],
    },
}


# Each library is imported only when used: importing anthropic takes
# seconds.


def openai_client(spec, token, asynchronous=False):
    import openai

    cls = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return cls(api_key=token, base_url=spec["base_url"] + "/v1", max_retries=0, timeout=120)


def anthropic_client(spec, token):
    import anthropic

    return anthropic.Anthropic(api_key=token, base_url=spec["base_url"], max_retries=0, timeout=120)


# --- Chat Completions -------------------------------------------------------


def chat_request(spec, history):
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": spec.get("question", QUESTION)}]
    messages += history
    args = {
        "model": spec["model"],
        "messages": messages,
        "tools": [{"type": "function", "function": TOOL}],
        "max_tokens": spec["max_tokens"],
    }
    if spec["force_tool"] and not history:
        args["messages"] = messages + [{"role": "assistant", "content": PREFILL}]
        args["tool_choice"] = "required"
        args["parallel_tool_calls"] = False
        if spec.get("stop", True):
            args["stop"] = ["</tool_call>"]
    return args


def chat_turn(spec, client, history):
    args = chat_request(spec, history)
    if not spec["stream"]:
        r = client.chat.completions.create(**args)
        choice = r.choices[0]
        calls = [
            {"id": c.id, "name": c.function.name, "input": arguments(c.function.arguments)}
            for c in choice.message.tool_calls or []
        ]
        return {
            "id": r.id,
            "text": choice.message.content or "",
            "calls": calls,
            "stop": choice.finish_reason,
            "usage": {"input": r.usage.prompt_tokens, "output": r.usage.completion_tokens},
            "model": r.model,
        }
    stream = client.chat.completions.create(
        **args, stream=True, stream_options={"include_usage": True}
    )
    text, calls, stop, usage, events, ids = "", {}, None, None, [], set()
    for chunk in stream:
        ids.add(chunk.id)
        if chunk.usage is not None:
            usage = {"input": chunk.usage.prompt_tokens, "output": chunk.usage.completion_tokens}
        if not chunk.choices:
            events.append("usage")
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        if delta.role:
            events.append("role")
        if delta.content:
            events.append("content")
            text += delta.content
        for c in delta.tool_calls or []:
            events.append("tool_calls")
            call = calls.setdefault(c.index, {"id": None, "name": None, "arguments": ""})
            if c.id:
                call["id"] = c.id
            if c.function and c.function.name:
                call["name"] = c.function.name
            if c.function and c.function.arguments:
                call["arguments"] += c.function.arguments
        if choice.finish_reason:
            events.append("finish")
            stop = choice.finish_reason
    return {
        "ids": sorted(ids),
        "text": text,
        "calls": [
            {"id": c["id"], "name": c["name"], "input": arguments(c["arguments"])}
            for _, c in sorted(calls.items())
        ],
        "stop": stop,
        "usage": usage,
        "events": dedup(events),
    }


def chat_follow_up(turn):
    call = turn["calls"][0]
    return [
        {
            "role": "assistant",
            "content": turn["text"] or None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["input"])},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call["id"], "content": RESULT},
    ]


# --- Responses --------------------------------------------------------------


def responses_request(spec, history):
    items = [{"role": "user", "content": spec.get("question", QUESTION)}] + history
    args = {
        "model": spec["model"],
        "instructions": SYSTEM,
        "input": items,
        "tools": [{"type": "function", **TOOL}],
        "max_output_tokens": spec["max_tokens"],
        "temperature": 0,
        "store": False,
    }
    if spec["force_tool"] and not history:
        args["input"] = items + [
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": PREFILL}]}
        ]
        args["tool_choice"] = "required"
        args["parallel_tool_calls"] = False
    return args


def arguments(text):
    """A call's arguments as JSON, or the text when it is not JSON."""
    try:
        return json.loads(text or "{}")
    except json.JSONDecodeError:
        return {"unparsed": text}


def responses_output(r):
    text, calls = "", []
    for item in r.output:
        if item.type == "message":
            text += "".join(p.text for p in item.content if p.type == "output_text")
        elif item.type == "function_call":
            calls.append({"id": item.call_id, "name": item.name, "input": arguments(item.arguments)})
    return text, calls


def responses_turn(spec, client, history):
    args = responses_request(spec, history)
    if not spec["stream"]:
        r = client.responses.create(**args)
        text, calls = responses_output(r)
        return {
            "id": r.id,
            "text": text,
            "calls": calls,
            "stop": r.status,
            "usage": {"input": r.usage.input_tokens, "output": r.usage.output_tokens},
            "model": r.model,
        }
    events, final, deltas = [], None, ""
    with client.responses.stream(**args) as stream:
        for event in stream:
            events.append(event.type)
            if event.type == "response.output_text.delta":
                deltas += event.delta
            # The SDK's get_final_response() takes only a completed
            # response; one cut off at its output cap ends incomplete.
            if event.type in ("response.completed", "response.incomplete", "response.failed"):
                final = event.response
    if final is None:
        raise SystemExit(f"the stream ended without a final response: {events}")
    text, calls = responses_output(final)
    return {
        "id": final.id,
        "text": text,
        "streamed_text": deltas,
        "calls": calls,
        "stop": final.status,
        "usage": {"input": final.usage.input_tokens, "output": final.usage.output_tokens},
        "events": dedup(events),
    }


def responses_follow_up(turn):
    call = turn["calls"][0]
    return [
        {"type": "function_call", "call_id": call["id"], "name": call["name"],
         "arguments": json.dumps(call["input"])},
        {"type": "function_call_output", "call_id": call["id"], "output": RESULT},
    ]


# --- Anthropic Messages -----------------------------------------------------


def anthropic_request(spec, history):
    messages = [{"role": "user", "content": spec.get("question", QUESTION)}] + history
    args = {
        "model": spec["model"],
        "system": SYSTEM,
        "messages": messages,
        "tools": [{"name": TOOL["name"], "description": TOOL["description"],
                   "input_schema": TOOL["parameters"]}],
        "max_tokens": spec["max_tokens"],
    }
    if spec["force_tool"] and not history:
        args["messages"] = messages + [{"role": "assistant", "content": PREFILL}]
        args["tool_choice"] = {"type": "any", "disable_parallel_tool_use": True}
        args["stop_sequences"] = ["</tool_call>"]
    return args


def anthropic_output(message):
    text = "".join(b.text for b in message.content if b.type == "text")
    calls = [{"id": b.id, "name": b.name, "input": b.input}
             for b in message.content if b.type == "tool_use"]
    return text, calls


def anthropic_turn(spec, client, history):
    args = anthropic_request(spec, history)
    if not spec["stream"]:
        m = client.messages.create(**args)
        text, calls = anthropic_output(m)
        return {
            "id": m.id,
            "text": text,
            "calls": calls,
            "stop": m.stop_reason,
            "usage": {"input": m.usage.input_tokens, "output": m.usage.output_tokens},
            "model": m.model,
        }
    events = []
    with client.messages.stream(**args) as stream:
        for event in stream:
            events.append(event.type)
        final = stream.get_final_message()
    text, calls = anthropic_output(final)
    return {
        "id": final.id,
        "text": text,
        "calls": calls,
        "stop": final.stop_reason,
        "usage": {"input": final.usage.input_tokens, "output": final.usage.output_tokens},
        "events": dedup(events),
    }


def anthropic_follow_up(turn):
    call = turn["calls"][0]
    content = ([{"type": "text", "text": turn["text"]}] if turn["text"] else []) + [
        {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["input"]}
    ]
    return [
        {"role": "assistant", "content": content},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call["id"], "content": RESULT}]},
    ]


FORMATS = {
    "chat": (openai_client, chat_turn, chat_follow_up),
    "responses": (openai_client, responses_turn, responses_follow_up),
    "anthropic": (anthropic_client, anthropic_turn, anthropic_follow_up),
}


def dedup(events):
    """The event types in order, runs of the same one collapsed."""
    out = []
    for e in events:
        if not out or out[-1] != e:
            out.append(e)
    return out


def conversation(spec):
    make, turn, follow_up = FORMATS[spec["format"]]
    client = make(spec, spec["tokens"][0])
    first = turn(spec, client, [])
    if not first["calls"]:
        return {"turns": [first]}
    second = turn(dict(spec, force_tool=False), client, follow_up(first))
    return {"turns": [first, second]}


def refused(spec):
    """One request per token, each expected to fail."""
    make, turn, _ = FORMATS[spec["format"]]
    results = []
    for token in spec["tokens"]:
        client = make(spec, token)
        try:
            turn(spec, client, [])
            results.append({"status": 200})
        except Exception as e:  # the libraries' APIStatusError
            if not hasattr(e, "status_code"):
                raise
            body = e.body if isinstance(e.body, dict) else {}
            error = body.get("error", body)
            results.append({
                "status": e.status_code,
                "class": type(e).__name__,
                "type": error.get("type") if isinstance(error, dict) else None,
                "message": error.get("message") if isinstance(error, dict) else str(e),
            })
    return results[0] if len(results) == 1 else {"results": results}


def drop(spec):
    """Reads a stream until its first piece of text, then closes it."""
    make, _, _ = FORMATS[spec["format"]]
    client = make(spec, spec["tokens"][0])
    seen = 0
    if spec["format"] == "anthropic":
        args = anthropic_request(dict(spec, force_tool=False), [])
        args.pop("tools")
        with client.messages.stream(**args) as stream:
            for event in stream:
                seen += 1
                if event.type == "content_block_delta":
                    break
    elif spec["format"] == "responses":
        args = responses_request(dict(spec, force_tool=False), [])
        args.pop("tools")
        with client.responses.stream(**args) as stream:
            for event in stream:
                seen += 1
                if event.type == "response.output_text.delta":
                    break
    else:
        args = chat_request(dict(spec, force_tool=False), [])
        args.pop("tools")
        stream = client.chat.completions.create(**args, stream=True)
        for chunk in stream:
            seen += 1
            if chunk.choices and chunk.choices[0].delta.content:
                break
        stream.close()
    return {"events": seen}


async def concurrent(spec):
    tokens = spec["tokens"]
    import openai

    clients = [openai_client(spec, t, asynchronous=True) for t in tokens]

    async def one(i):
        client = clients[i % len(clients)]
        args = chat_request(dict(spec, force_tool=False), [])
        args.pop("tools")
        try:
            stream = await client.chat.completions.create(
                **args, stream=True, stream_options={"include_usage": True}
            )
            usage = None
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = chunk.usage.prompt_tokens + chunk.usage.completion_tokens
            return {"token": i % len(clients), "used": usage}
        except openai.APIStatusError as e:
            return {"token": i % len(clients), "status": e.status_code}

    results = await asyncio.gather(*(one(i) for i in range(spec["requests"])))
    return {"results": results}


def main():
    spec = json.loads(sys.argv[1])
    spec.setdefault("force_tool", False)
    spec.setdefault("max_tokens", 64)
    spec.setdefault("stream", False)
    mode = spec["mode"]
    if mode == "conversation":
        out = conversation(spec)
    elif mode == "refused":
        out = refused(spec)
    elif mode == "drop":
        out = drop(spec)
    elif mode == "concurrent":
        out = asyncio.run(concurrent(spec))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()

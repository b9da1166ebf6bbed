"""Runs a saved team through agentd's OpenAI-compatible API with the
official openai Python package, as an application would, and prints one
JSON object with what each call gave (the fields of e2e/js/openai.mjs's).
Used by the end-to-end tests.

    python3 openai_sdk.py <agentd base URL> <bearer key> <team>
"""
import json
import sys

import openai
from openai import OpenAI


def conversation_id(response):
    # Older releases of the package do not know the field: it is then kept
    # as the raw object.
    return (response.model_dump().get("conversation") or {}).get("id")


def main():
    base, api_key, team = sys.argv[1:4]
    client = OpenAI(base_url=base + "/openai/v1", api_key=api_key, max_retries=0)
    model = "team:" + team
    out = {"version": openai.__version__}

    out["models"] = [m.id for m in client.models.list()]

    done = client.chat.completions.create(model=model, messages=[
        {"role": "system", "content": "Earlier context."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "Say hello."},
    ])
    out["completion"] = {"id": done.id, "content": done.choices[0].message.content,
                         "finish": done.choices[0].finish_reason, "usage": done.usage.model_dump()}

    stream = {"id": "", "pieces": [], "finish": None, "usage": None}
    for chunk in client.chat.completions.create(
            model=model, stream=True, stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "Stream it."}]):
        stream["id"] = chunk.id
        if chunk.usage:
            stream["usage"] = chunk.usage.model_dump()
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        if choice.delta.content:
            stream["pieces"].append(choice.delta.content)
        if choice.finish_reason:
            stream["finish"] = choice.finish_reason
    out["stream"] = stream

    first = client.responses.create(model=model, input="Turn one.")
    out["turn1"] = {"id": first.id, "conversation": conversation_id(first), "text": first.output_text,
                    "status": first.status, "usage": first.usage.model_dump() if first.usage else None}
    deltas, final = [], None
    for event in client.responses.create(model=model, input="Turn two.", previous_response_id=first.id, stream=True):
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        elif event.type == "response.completed":
            final = event.response
    out["turn2"] = {"id": final.id, "conversation": conversation_id(final), "text": final.output_text,
                    "status": final.status, "previous": final.previous_response_id, "deltas": deltas}
    again = client.responses.retrieve(first.id)
    out["retrieved"] = {"id": again.id, "text": again.output_text, "status": again.status}

    try:
        client.chat.completions.create(model="team:no-such-team", messages=[{"role": "user", "content": "hi"}])
        out["unknown"] = {"error": "none"}
    except openai.APIStatusError as e:
        out["unknown"] = {"status": e.status_code, "type": e.type, "code": e.code, "param": e.param,
                          "message": e.message}

    print(json.dumps(out))


main()

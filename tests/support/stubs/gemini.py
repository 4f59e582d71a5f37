"""A stub of the Gemini API (``/v1beta/models/<model>:generateContent`` and
``:streamGenerateContent``), the wire Gemini CLI speaks with ``gemini-api-key``
auth and ``GOOGLE_GEMINI_BASE_URL``.

A ``Run`` turn becomes a ``functionCall`` of the CLI's ``run_shell_command`` tool;
a ``Call`` turn a ``functionCall`` of the offered MCP tool of that name; a ``Say``
turn a text part. Side requests the CLI makes on its own (routing and
next-speaker checks, which ask for JSON; history compression, which asks for a
summary) get fixed, plausible answers and never reach the policy. ``prompt_tokens``
(a number, or a function of the model turn's index) is the reported prompt size: past
half the model's window the CLI compresses its history, which is how PreCompress is
reached.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.support.stubs import faults
from tests.support.stubs.loopback import (
    Call,
    Exchange,
    Recorded,
    Run,
    Say,
    StubBase,
    Turn,
    resolve_tool,
    sse,
)

MODEL = "gemini-2.5-flash"


def gemini_home(home: Path, *, compression_threshold: float | None = None) -> Path:
    """Write the user settings Gemini CLI needs to run headless against the stub
    (API-key auth; no telemetry, update checks or IDE probing) under ``home``
    (used as ``GEMINI_CLI_HOME``)."""
    settings: dict[str, Any] = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
        "telemetry": {"enabled": False},
        "privacy": {"usageStatisticsEnabled": False},
        "ide": {"enabled": False},
    }
    if compression_threshold is not None:
        settings["model"] = {"compressionThreshold": compression_threshold}
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return path


def gemini_env(port: int, home: Path) -> dict[str, str]:
    return {
        "GEMINI_CLI_HOME": str(home),
        "GEMINI_API_KEY": "stub-key",
        "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "GEMINI_MODEL": MODEL,
        "NO_BROWSER": "1",
    }


def offered_tools(body: Any) -> list[str]:
    return [str(d.get("name")) for t in (body.get("tools") if isinstance(body, dict) else None) or []
            if isinstance(t, dict) for d in t.get("functionDeclarations") or [] if isinstance(d, dict)]


def exchange_of(body: Any) -> Exchange:
    ex = Exchange(body=body, tools=offered_tools(body))
    for content in (body.get("contents") if isinstance(body, dict) else None) or []:
        if not isinstance(content, dict):
            continue
        role = content.get("role")
        for part in content.get("parts") or []:
            if not isinstance(part, dict):
                continue
            if "functionResponse" in part:
                ex.tool_outputs.append(json.dumps(part["functionResponse"].get("response")))
                ex.last_was_tool_output = True
            elif role == "user" and isinstance(part.get("text"), str):
                ex.texts.append(part["text"])
                ex.last_was_tool_output = False
            elif role == "model":
                ex.last_was_tool_output = False
    return ex


def _side_request(body: Any) -> str | None:
    """What kind of CLI-internal request this is, or None for an agent turn."""
    if not isinstance(body, dict):
        return "invalid"
    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json" or config.get("responseJsonSchema") \
            or config.get("responseSchema"):
        return "json"
    if "state_snapshot" in json.dumps(body.get("systemInstruction") or ""):
        return "compression"
    return None


class GeminiStub(StubBase):
    def __init__(self, policy: Any, *, prompt_tokens: int | Callable[[int], int] = 100,
                 lifetime: float = 300.0) -> None:
        super().__init__(policy, lifetime)
        self.prompt_tokens = prompt_tokens
        self.compressions = 0

    fault_wire = staticmethod(faults.google)

    def is_model_request(self, request: Recorded) -> bool:
        return request.method == "POST" and "GenerateContent" in request.path

    def model_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.method == "POST" and "GenerateContent" in r.path
                and _side_request(r.body) is None]

    def respond(self, request: Recorded) -> tuple[int, str, Iterable[bytes]]:
        path = request.path.split("?")[0]
        if request.method != "POST" or not path.startswith("/v1beta/models/"):
            return 404, "application/json", [b'{"error": {"code": 404, "message": "not here"}}']
        streaming = path.endswith(":streamGenerateContent")
        if path.endswith(":countTokens"):
            return 200, "application/json", [json.dumps({"totalTokens": 100}).encode()]
        if not (streaming or path.endswith(":generateContent")):
            return 404, "application/json", [b'{"error": {"code": 404, "message": "unknown method"}}']
        kind = _side_request(request.body)
        if kind == "json":
            parts = [{"text": json.dumps(self._json_answer(request.body))}]
        elif kind == "compression":
            self.compressions += 1
            parts = [{"text": "<state_snapshot><overall_goal>work in progress</overall_goal></state_snapshot>"}]
        elif kind == "invalid":
            return 400, "application/json", [b'{"error": {"code": 400, "message": "bad request"}}']
        else:
            parts = [self._part(self.next_turn(exchange_of(request.body)), request.body)]
        tokens = self.prompt_tokens(self.model_turns - 1) if callable(self.prompt_tokens) else self.prompt_tokens
        if kind is not None:
            tokens = 100  # a side call (routing, next speaker, compression): not in the CLI's chat file
        else:
            self.served.append((tokens, 10))
        chunk = {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": tokens, "candidatesTokenCount": 10,
                              "totalTokenCount": tokens + 10},
            "modelVersion": MODEL,
        }
        if streaming:
            return 200, "text/event-stream", [sse(None, chunk)]
        return 200, "application/json", [json.dumps(chunk).encode()]

    @staticmethod
    def _json_answer(body: Any) -> dict[str, Any]:
        schema = json.dumps(body.get("generationConfig") or {})
        if "next_speaker" in schema:
            return {"reasoning": "The model finished its turn.", "next_speaker": "user"}
        if "model_choice" in schema:
            return {"reasoning": "Simple task.", "model_choice": "flash"}
        return {}

    @staticmethod
    def _part(turn: Turn, body: Any) -> dict[str, Any]:
        if isinstance(turn, Say):
            return {"text": turn.text}
        if isinstance(turn, Call):
            return {"functionCall": {"name": resolve_tool(offered_tools(body), turn.tool), "args": turn.arguments}}
        assert isinstance(turn, Run)
        return {"functionCall": {"name": "run_shell_command", "args": {"command": turn.command}}}

"""Scripted, seedable faults for the model stubs: rate limits, plan (usage) limits and
outages, answered the way each real API answers them.

Every stub (``anthropic.StubServer``, ``openai_responses.ResponsesStub``,
``gemini.GeminiStub``) has a ``faults`` attribute, a ``Faults`` script. Before it answers
an agent's model request, the stub asks the script for the next fault; when there is
one, the request gets that fault's error answer (status, headers, body) in its API's
own shape instead of a model turn, and the policy is not consulted.

    stub.faults.fail(Fault("rate_limit", reset_in=75), times=3)   # the next 3 requests: 429
    stub.faults.passes(2).fail(Fault("overloaded"))               # 2 answered, then one 529
    stub.faults.fail(Fault("usage_limit", reset_in=3600), for_seconds=60)
        # every request for 60 s from the first one it hits: the plan limit, its reset
        # time the same fixed moment for all of them (counting down as a real one does)
    stub.faults.at_random(seed=7, probability=0.1, fault=Fault("server_error"))
        # once the script is used up: each request fails with that probability, seeded

Steps run in the order given; ``stub.faults.served`` lists (request number, fault kind,
epoch the limit resets at) of every fault answered, for assertions.

Kinds, and what each API answers (the real headers and bodies, values from the fault):

- ``rate_limit``: HTTP 429 with ``retry-after`` (seconds). Anthropic adds
  ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}``
  (reset as RFC 3339) and a ``rate_limit_error`` body; OpenAI adds
  ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (reset as ``1m15s``) and a
  ``rate_limit_exceeded`` body saying "Please try again in 1m15s"; Google answers
  ``RESOURCE_EXHAUSTED`` with a per-minute ``QuotaFailure`` and ``RetryInfo.retryDelay``.
- ``usage_limit``: the plan's limit. Anthropic: 429 with the subscription headers
  ``anthropic-ratelimit-unified-status: rejected``, ``-unified-reset`` (epoch seconds),
  ``-unified-representative-claim: five_hour``; OpenAI: 429 ``usage_limit_reached`` with
  ``resets_at`` / ``resets_in_seconds`` (what ChatGPT-plan accounts get), or with
  ``quota=True`` the API's ``insufficient_quota``; Google: 429 ``RESOURCE_EXHAUSTED``
  with a per-day quota (the CLI treats it as terminal).
- ``overloaded``: Anthropic 529 ``overloaded_error``; OpenAI 503 "The server is
  overloaded"; Google 503 ``UNAVAILABLE`` "The model is overloaded".
- ``server_error``: HTTP 500 (``api_error`` / ``server_error`` / ``INTERNAL``).
- ``unavailable``: HTTP 503.
"""

from __future__ import annotations

import datetime
import json
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

KINDS = ("rate_limit", "usage_limit", "overloaded", "server_error", "unavailable")


@dataclass(frozen=True)
class Fault:
    kind: str
    reset_in: float = 60.0  # seconds from the answer until the limit resets
    retry_after: float | None = None  # the retry-after header; default reset_in (rate/usage limits)
    quota: bool = False  # OpenAI usage_limit: the API-key "insufficient_quota" form
    window: str = "five_hour"  # Anthropic usage_limit: which plan window ("five_hour", "seven_day")

    def __post_init__(self) -> None:
        assert self.kind in KINDS, f"unknown fault kind {self.kind!r}; one of {KINDS}"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class _Step:
    fault: Fault | None  # None: let requests pass
    times: int | None = None
    for_seconds: float | None = None
    started: float | None = None  # monotonic time of the step's first request
    resets_at: float | None = None  # wall-clock epoch the step's limit resets at


class Faults:
    def __init__(self) -> None:
        self._steps: list[_Step] = []
        self._random: tuple[random.Random, float, Fault] | None = None
        self._lock = threading.Lock()
        self.requests = 0
        self.served: list[tuple[int, str, float]] = []

    # -- the script
    def fail(self, fault: Fault, *, times: int | None = None, for_seconds: float | None = None) -> Faults:
        """The next `times` requests (default 1), or every request for `for_seconds` from
        the first one, answer `fault`."""
        if times is None and for_seconds is None:
            times = 1
        with self._lock:
            self._steps.append(_Step(fault, times, for_seconds))
        return self

    def passes(self, times: int) -> Faults:
        """The next `times` requests are answered normally."""
        with self._lock:
            self._steps.append(_Step(None, times))
        return self

    def at_random(self, *, seed: int, probability: float, fault: Fault) -> Faults:
        """Once the script is used up: each request answers `fault` with `probability`."""
        with self._lock:
            self._random = (random.Random(seed), probability, fault)
        return self

    def clear(self) -> None:
        with self._lock:
            self._steps.clear()
            self._random = None

    # -- what a stub asks
    def take(self) -> tuple[Fault, float] | None:
        """The fault for this request and the epoch its limit resets at, or None."""
        with self._lock:
            self.requests += 1
            while self._steps:
                step = self._steps[0]
                now = time.monotonic()
                if step.started is None:
                    step.started = now
                    if step.fault is not None:
                        step.resets_at = time.time() + (step.for_seconds if step.for_seconds is not None
                                                        else step.fault.reset_in)
                if step.for_seconds is not None and now - step.started >= step.for_seconds:
                    self._steps.pop(0)
                    continue
                if step.times is not None:
                    if step.times <= 0:
                        self._steps.pop(0)
                        continue
                    step.times -= 1
                if step.fault is None:
                    return None
                assert step.resets_at is not None
                resets_at = step.resets_at if step.for_seconds is not None else time.time() + step.fault.reset_in
                self.served.append((self.requests, step.fault.kind, resets_at))
                return step.fault, resets_at
            if self._random is not None:
                rng, probability, fault = self._random
                if rng.random() < probability:
                    resets_at = time.time() + fault.reset_in
                    self.served.append((self.requests, fault.kind, resets_at))
                    return fault, resets_at
            return None


# -- the answers, per API -------------------------------------------------------------------


def _rfc3339(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds_left(resets_at: float) -> int:
    return max(1, round(resets_at - time.time()))


def _retry_after(fault: Fault, resets_at: float) -> str:
    return str(round(fault.retry_after) if fault.retry_after is not None else _seconds_left(resets_at))


def _duration(seconds: int) -> str:
    """OpenAI's reset format: 1m15s, 20s, 2h0m0s."""
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m}m{s}s"
    return f"{m}m{s}s" if m else f"{s}s"


def _json(data: Any) -> bytes:
    return json.dumps(data).encode()


def anthropic(fault: Fault, resets_at: float) -> Answer:
    headers = {"request-id": "req_stub_fault", "x-should-retry": "true"}

    def error(kind: str, message: str) -> bytes:
        return _json({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_stub_fault"})

    if fault.kind == "rate_limit":
        headers["retry-after"] = _retry_after(fault, resets_at)
        for limit, size in (("requests", 50), ("tokens", 80000), ("input-tokens", 40000), ("output-tokens", 8000)):
            headers[f"anthropic-ratelimit-{limit}-limit"] = str(size)
            headers[f"anthropic-ratelimit-{limit}-remaining"] = "0" if limit == "requests" else str(size // 2)
            headers[f"anthropic-ratelimit-{limit}-reset"] = _rfc3339(resets_at)
        return Answer(429, headers, error("rate_limit_error", "This request would exceed the rate limit for your "
                                          "organization of 50 requests per minute. For details, refer to: "
                                          "https://docs.claude.com/en/api/rate-limits."))
    if fault.kind == "usage_limit":
        short = {"five_hour": "5h", "seven_day": "7d"}.get(fault.window, "5h")
        headers.update({
            "retry-after": _retry_after(fault, resets_at),
            "x-should-retry": "false",
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-reset": str(round(resets_at)),
            "anthropic-ratelimit-unified-representative-claim": fault.window,
            f"anthropic-ratelimit-unified-{short}-status": "rejected",
            f"anthropic-ratelimit-unified-{short}-reset": str(round(resets_at)),
            f"anthropic-ratelimit-unified-{short}-utilization": "1.0",
            "anthropic-ratelimit-unified-overage-status": "rejected",
            "anthropic-ratelimit-unified-overage-disabled-reason": "org_level_disabled",
        })
        return Answer(429, headers, error("rate_limit_error", "Error"))
    if fault.kind == "overloaded":
        return Answer(529, headers, error("overloaded_error", "Overloaded"))
    if fault.kind == "server_error":
        return Answer(500, headers, error("api_error", "Internal server error"))
    return Answer(503, headers, error("api_error", "Service unavailable"))


def openai(fault: Fault, resets_at: float) -> Answer:
    left = _seconds_left(resets_at)
    headers = {"x-request-id": "req_stub_fault"}
    if fault.kind == "rate_limit":
        headers.update({
            "retry-after": _retry_after(fault, resets_at),
            "x-ratelimit-limit-requests": "50", "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": _duration(left),
            "x-ratelimit-limit-tokens": "80000", "x-ratelimit-remaining-tokens": "40000",
            "x-ratelimit-reset-tokens": _duration(left),
        })
        message = (f"Rate limit reached for stub-model in organization org-stub on requests per min (RPM): "
                   f"Limit 50, Used 50, Requested 1. Please try again in {_duration(left)}.")
        return Answer(429, headers, _json({"error": {"message": message, "type": "requests", "param": None,
                                                     "code": "rate_limit_exceeded"}}))
    if fault.kind == "usage_limit":
        if fault.quota:
            return Answer(429, headers, _json({"error": {
                "message": "You exceeded your current quota, please check your plan and billing details.",
                "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}))
        return Answer(429, headers, _json({"error": {
            "type": "usage_limit_reached", "message": "The usage limit has been reached", "plan_type": "plus",
            "resets_at": round(resets_at), "resets_in_seconds": left}}))
    if fault.kind == "server_error":
        return Answer(500, headers, _json({"error": {"message": "The server had an error while processing your "
                                                                "request. Sorry about that!",
                                                     "type": "server_error", "param": None, "code": None}}))
    return Answer(503, headers, _json({"error": {"message": "The server is overloaded or not ready yet.",
                                                 "type": "server_error", "param": None, "code": None}}))


def google(fault: Fault, resets_at: float) -> Answer:
    left = _seconds_left(resets_at)
    if fault.kind in ("rate_limit", "usage_limit"):
        per_day = fault.kind == "usage_limit"
        quota_id = ("GenerateRequestsPerDayPerProjectPerModel-FreeTier" if per_day
                    else "GenerateRequestsPerMinutePerProjectPerModel-FreeTier")
        metric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
        details: list[dict[str, Any]] = [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
             "violations": [{"quotaMetric": metric, "quotaId": quota_id,
                             "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
                             "quotaValue": "250" if per_day else "10"}]},
            {"@type": "type.googleapis.com/google.rpc.Help",
             "links": [{"description": "Learn more about Gemini API quotas",
                        "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
        ]
        if not per_day:
            details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{left}s"})
        message = ("You exceeded your current quota, please check your plan and billing details. "
                   f"* Quota exceeded for metric: {metric}, limit: {'250' if per_day else '10'}, "
                   f"model: gemini-2.5-flash\nPlease retry in {left}.0s.")
        return Answer(429, {}, _json({"error": {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED",
                                                "details": details}}))
    if fault.kind == "server_error":
        return Answer(500, {}, _json({"error": {"code": 500, "message": "An internal error has occurred. Please "
                                                                      "retry or report in "
                                                                      "https://developers.generativeai.google/guide/troubleshooting",
                                                "status": "INTERNAL"}}))
    return Answer(503, {}, _json({"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                                            "status": "UNAVAILABLE"}}))

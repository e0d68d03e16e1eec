"""Responses-API conformance checks over HTTP with the real `openai` SDK. One row per check:
name, passed, detail, request_id. Every request carries its own X-Request-ID and
`X-Qualflow-Phase: protocol`, so its server timing record joins by request id."""

from __future__ import annotations

import json
import traceback
import uuid
from collections.abc import Callable

import openai

from qualflow.phases import PHASE_HEADER, PROTOCOL

from .outputs import write_protocol
from .rejections import CAPABILITY_REJECTIONS, REJECTIONS
from .signals import raise_if_interrupted

PROMPT = "Protocol check: say hello."
HELPER_MAX_TOKENS = 64  # the get_final_response() check: room for a natural stop


class CheckFailed(AssertionError):
    pass


def _expect(cond: bool, msg: str) -> None:
    if not cond:
        raise CheckFailed(msg)


def _rid(name: str) -> str:
    return f"protocol-{name}-{uuid.uuid4().hex[:12]}"


class Checker:
    def __init__(
        self,
        url: str,
        model: str,
        timeout_s: float = 300.0,
        max_output_tokens: int = 8,
        api_key: str | None = None,
        request_extensions: bool = True,
        served: frozenset[str] = frozenset(),
    ):
        self.model = model
        self.served = served  # the capabilities the stack serves: their rejections do not run
        # truncation checks send qualflow's ignore_eos only where the stack is told to take
        # extensions
        self.truncate_extra = {"extra_body": {"ignore_eos": True}} if request_extensions else {}
        self.max_tokens = max_output_tokens
        self.client = openai.OpenAI(
            base_url=url.rstrip("/") + "/v1",
            api_key=api_key or "qualflow-local",
            timeout=timeout_s,
            max_retries=0,
        )

    def _headers(self, rid: str) -> dict:
        return {"X-Request-ID": rid, PHASE_HEADER: PROTOCOL}

    def non_stream(self, rid: str) -> str:
        raw = self.client.responses.with_raw_response.create(
            model=self.model,
            input=PROMPT,
            max_output_tokens=self.max_tokens,
            store=False,
            extra_headers=self._headers(rid),
        )
        r = raw.parse()
        _expect(r.object == "response", f"object={r.object!r}")
        _expect(r.id.startswith("resp_"), f"response id {r.id!r} does not start with resp_")
        _expect(r.status in ("completed", "incomplete"), f"status={r.status!r}")
        msgs = [o for o in r.output if o.type == "message"]
        _expect(len(msgs) == 1, f"{len(msgs)} message output items")
        _expect(
            msgs[0].id.startswith("msg_"), f"message id {msgs[0].id!r} does not start with msg_"
        )
        _expect(isinstance(r.output_text, str), "output_text is not a string")
        _expect(r.usage is not None and r.usage.output_tokens >= 1, f"usage={r.usage}")
        _expect(raw.headers.get("x-request-id") == rid, "X-Request-ID not echoed")
        return f"status={r.status} output_tokens={r.usage.output_tokens}"

    def stream_event_order(self, rid: str) -> str:
        events = list(
            self.client.responses.create(
                model=self.model,
                input=PROMPT,
                max_output_tokens=self.max_tokens,
                stream=True,
                store=False,
                extra_headers=self._headers(rid),
            )
        )
        types = [e.type for e in events]
        _expect(len(types) >= 4, f"only {len(types)} events: {types}")
        _expect(types[0] == "response.created", f"first event {types[0]!r}")
        _expect(types[1] == "response.in_progress", f"second event {types[1]!r}")
        _expect(
            types[-1] in ("response.completed", "response.incomplete"), f"last event {types[-1]!r}"
        )
        seq = [e.sequence_number for e in events]
        _expect(
            seq == list(range(seq[0], seq[0] + len(seq))),
            f"sequence numbers not consecutive: {seq}",
        )
        order = [
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
        ]
        pos = [types.index(t) if t in types else -1 for t in order]
        _expect(-1 not in pos, f"missing events: {[t for t, p in zip(order, pos) if p < 0]}")
        _expect(pos == sorted(pos), f"events out of order: {types}")
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        done = next(e for e in events if e.type == "response.output_text.done")
        _expect(deltas == done.text, "concatenated deltas differ from output_text.done text")
        final = events[-1].response
        _expect(final.output_text == deltas, "final response text differs from the deltas")
        return (
            f"{len(events)} events, {types.count('response.output_text.delta')} deltas, "
            f"seq {seq[0]}..{seq[-1]}"
        )

    def stream_helper_final(self, rid: str) -> str:
        """`responses.stream(...)` helper: typed events, then `get_final_response()`. The SDK only
        builds a final response from `response.completed`, so this check leaves room for a natural
        stop (HELPER_MAX_TOKENS; the embedded default stops some forty tokens in). A response cut at
        that limit ends with `response.incomplete`; then the check verifies the helper's parsed
        terminal event instead, and says so."""
        with self.client.responses.stream(
            model=self.model,
            input=PROMPT,
            max_output_tokens=HELPER_MAX_TOKENS,
            store=False,
            extra_headers=self._headers(rid),
        ) as s:
            events = list(s)
            text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
            last = events[-1].type if events else None
            if last == "response.completed":
                final = s.get_final_response()
                _expect(final.status == "completed", f"status={final.status!r}")
                _expect(
                    final.output_text == text,
                    "get_final_response() text differs from streamed deltas",
                )
                return f"get_final_response(): completed, chars={len(text)}"
        _expect(last == "response.incomplete", f"stream ended with {last!r}")
        final = events[-1].response
        _expect(final.status == "incomplete", f"status={final.status!r}")
        _expect(final.output_text == text, "terminal response text differs from streamed deltas")
        return (
            f"response incomplete at max_output_tokens={HELPER_MAX_TOKENS} (no stop): helper "
            f"parsed {len(events)} events; get_final_response() needs response.completed (SDK)"
        )

    def incomplete_on_truncation(self, rid: str) -> str:
        r = self.client.responses.create(
            model=self.model,
            input=PROMPT,
            max_output_tokens=2,
            store=False,
            extra_headers=self._headers(rid),
            **self.truncate_extra,
        )
        _expect(r.status == "incomplete", f"status={r.status!r}")
        reason = getattr(r.incomplete_details, "reason", None)
        _expect(reason == "max_output_tokens", f"incomplete_details.reason={reason!r}")
        _expect(r.usage.output_tokens == 2, f"output_tokens={r.usage.output_tokens}")
        return "status=incomplete reason=max_output_tokens"

    def stream_incomplete_on_truncation(self, rid: str) -> str:
        events = list(
            self.client.responses.create(
                model=self.model,
                input=PROMPT,
                max_output_tokens=2,
                stream=True,
                store=False,
                extra_headers=self._headers(rid),
                **self.truncate_extra,
            )
        )
        _expect(events[-1].type == "response.incomplete", f"last event {events[-1].type!r}")
        return "last event response.incomplete"

    def request_id_echo(self, rid: str) -> str:
        raw = self.client.responses.with_raw_response.create(
            model=self.model,
            input=PROMPT,
            max_output_tokens=1,
            store=False,
            extra_headers=self._headers(rid),
        )
        got = raw.headers.get("x-request-id")
        _expect(got == rid, f"X-Request-ID echoed as {got!r}")
        return "echoed"

    def rejection(self, rid: str, overrides: dict, param: str) -> str:
        kw = {
            "model": self.model,
            "input": PROMPT,
            "max_output_tokens": self.max_tokens,
            "store": False,
        }
        kw.update(overrides)
        try:
            self.client.responses.create(extra_headers=self._headers(rid), **kw)
        except openai.APIStatusError as e:
            _expect(e.status_code == 400, f"HTTP {e.status_code}, expected 400")
            err = (e.body or {}).get("error", e.body) if isinstance(e.body, dict) else {}
            _expect(isinstance(err, dict), f"error body {e.body!r}")
            _expect(
                err.get("param") == param, f"error.param={err.get('param')!r}, expected {param!r}"
            )
            _expect(bool(err.get("code")), "error.code missing")
            _expect(err.get("type") == "invalid_request_error", f"error.type={err.get('type')!r}")
            _expect(bool(err.get("message")), "error.message missing")
            echoed = e.response.headers.get("x-request-id")
            _expect(echoed == rid, f"X-Request-ID on the error echoed as {echoed!r}")
            return f"400 code={err.get('code')} param={param}"
        raise CheckFailed(
            f"request with {list(overrides)} was accepted; expected a 400 naming {param!r}"
        )

    def checks(self) -> list[tuple[str, Callable[[str], str]]]:
        out = [
            ("non_stream_response", self.non_stream),
            ("stream_event_order_and_sequence", self.stream_event_order),
            ("stream_helper_get_final_response", self.stream_helper_final),
            ("incomplete_on_truncation", self.incomplete_on_truncation),
            ("stream_incomplete_on_truncation", self.stream_incomplete_on_truncation),
            ("request_id_echo", self.request_id_echo),
        ]
        for name, overrides, param in REJECTIONS:
            out.append((name, lambda rid, o=overrides, p=param: self.rejection(rid, o, p)))
        for name, overrides, param, capability in CAPABILITY_REJECTIONS:
            if capability not in self.served:
                out.append((name, lambda rid, o=overrides, p=param: self.rejection(rid, o, p)))
        return out


def run_protocol_checks(
    url: str,
    model: str,
    timeout_s: float = 300.0,
    api_key: str | None = None,
    request_extensions: bool = True,
    more: Callable[[Checker], list[tuple[str, Callable[[str], str]]]] | None = None,
    served: frozenset[str] = frozenset(),
) -> list[dict]:
    """`more`: further checks on the same checker (session.reasoning_checks for a stack that
    serves thinking); `served`: the capabilities the stack serves (their rejections are left
    out)."""
    checker = Checker(
        url,
        model,
        timeout_s,
        api_key=api_key,
        request_extensions=request_extensions,
        served=served,
    )
    rows = []
    for name, fn in checker.checks() + (more(checker) if more is not None else []):
        rid = _rid(name)
        try:
            detail, passed = fn(rid), True
        except CheckFailed as e:
            detail, passed = str(e), False
        except Exception as e:  # noqa: BLE001 - any SDK/transport error is a failed check, with its reason
            raise_if_interrupted()  # a signal is not a failed check, whatever it was wrapped in
            detail, passed = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}", False
        rows.append({"name": name, "passed": passed, "detail": detail[:4000], "request_id": rid})
    return rows


def main_protocol(a) -> int:
    rows = run_protocol_checks(a.url, a.model)
    write_protocol(rows, a.out)
    failed = [r["name"] for r in rows if not r["passed"]]
    print(json.dumps({"checks": len(rows), "failed": failed}))
    return 1 if failed else 0

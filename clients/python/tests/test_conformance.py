"""The shared conformance cases (clients/conformance, README.md there) against the real processor."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, Processor

import foldstream
from foldstream import BadRequestError, UnknownSessionError, ValidationError

CASES = Path(os.environ.get("FOLDSTREAM_CONFORMANCE_DIR", REPO / "clients" / "conformance"))


def _expand(v: Any) -> Any:
    if isinstance(v, dict):
        if set(v) == {"$repeat", "count"}:
            return v["$repeat"] * v["count"]
        return {k: _expand(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_expand(x) for x in v]
    return v


def _load(name: str) -> Any:
    path = CASES / name
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{path}: the shared conformance cases are missing")
        pytest.skip(f"{path} missing")
    return _expand(json.loads(path.read_text(encoding="utf-8")))


def _cases(name: str) -> list[Any]:
    path = CASES / name
    if not path.exists():
        return [pytest.param(None, id="missing")]
    data = _expand(json.loads(path.read_text(encoding="utf-8")))
    return [pytest.param(c, id=c["name"]) for c in data["cases"]]


async def _publish(fs: foldstream.Client, kind: str, ev: dict[str, Any]) -> foldstream.PubAck:
    if kind == "turn":
        return await fs.publish_turn(
            ev.get("session", ""), ev.get("turn_id", ""), ev.get("speaker", ""), ev.get("text", ""),
            role=ev.get("role", ""), at=ev.get("at"), kind=ev.get("kind"), tool=ev.get("tool"),
            tokens=ev.get("tokens"), context_tokens=ev.get("context_tokens"), meta=ev.get("meta"))
    if kind == "note":
        return await fs.publish_note(ev.get("session", ""), ev.get("note_id", ""), ev.get("text", ""),
                                     source=ev.get("source"), at=ev.get("at"))
    return await fs.control(ev.get("session", ""), ev.get("op", ""), config=ev.get("config"))


async def _dead_letters(fs: foldstream.Client) -> int:
    msg = await fs.connection.request("$JS.API.STREAM.INFO.FOLD_DLQ", b"", 5)
    return int(json.loads(msg.data)["state"]["messages"])


async def _applied(fs: foldstream.Client, session: str, before: int) -> None:
    """Proves the session's events so far were applied, not dead-lettered: a refused turn after them is the only new dead letter."""
    sentinel = {"v": 1, "session": session, "turn_id": "sentinel", "at": "2026-11-22T20:00:00Z", "speaker": "S",
                "role": "sentinel", "text": "x"}
    await fs.connection.request(f"fold.in.{session}.turn", json.dumps(sentinel).encode(), 5)  # the stream's ack
    deadline = time.monotonic() + 20
    n = await _dead_letters(fs)
    while n < before + 1:
        assert time.monotonic() < deadline, "the sentinel was never dead-lettered"
        await asyncio.sleep(0.005)
        n = await _dead_letters(fs)
    assert n == before + 1, "an event of the case was dead-lettered too"


@pytest.mark.parametrize("case", _cases("events.json"))
def test_event(case: dict[str, Any] | None, processor: Processor) -> None:
    if case is None:
        _load("events.json")
        return
    ev = case["event"]
    if case.get("wire_only"):
        # Not expressible through the API; the wire-level validator still
        # has to agree with the processor.
        wire = {"v": 1, "at": "2026-11-22T20:00:00Z", **ev}
        with pytest.raises(ValidationError) as info:
            foldstream.validate_event(case["type"], case.get("subject_session", ev.get("session", "")), wire)
        assert info.value.field == case["field"]
        assert info.value.code == case["code"]
        return

    async def run() -> None:
        async with await foldstream.connect(processor.url) as fs:
            if case["valid"]:
                dead = await _dead_letters(fs)
                ack = await _publish(fs, case["type"], ev)
                assert ack.seq > 0 and ack.stream == "FOLD_IN"
                await _applied(fs, ev["session"], dead)
            else:
                sent_before = fs.connection.bytes_out
                with pytest.raises(ValidationError) as info:
                    await _publish(fs, case["type"], ev)
                assert info.value.field == case["field"], str(info.value)
                assert info.value.code == case["code"], str(info.value)
                assert fs.connection.bytes_out == sent_before, "something was sent"

    asyncio.run(run())


@pytest.fixture(scope="module")
def fixture_session(processor: Processor) -> str:
    fx = _load("fixture.json")
    session = fx["session"]

    async def run() -> None:
        async with await foldstream.connect(processor.url) as fs:
            turns = [foldstream.Turn(session, t["turn_id"], t["speaker"], t["text"], role=t["role"], at=t.get("at"))
                     for t in fx["turns"]]
            await fs.publish_turns(turns)
            want = fx["settled"]
            deadline = time.monotonic() + 30
            while True:
                try:
                    info = await fs.session(session)
                    if (info.caught_up and info.lease is None and info.total_turns == want["total_turns"]
                            and info.cursor == want["cursor"] and info.version == want["version"]):
                        return
                except UnknownSessionError:
                    pass
                assert time.monotonic() < deadline, "the fixture session never settled"
                await asyncio.sleep(0.05)

    asyncio.run(run())
    return str(session)


def _at(doc: Any, path: str) -> Any:
    cur = doc
    for part in path.split("."):
        if isinstance(cur, list):
            i = int(part)
            if i >= len(cur) or i < -len(cur):
                return None
            cur = cur[i]
        elif isinstance(cur, dict):
            cur = cur.get(part)
        else:
            return None
        if cur is None:
            return None
    return cur


def _check(doc: Any, exp: dict[str, Any], what: str) -> None:
    for path, want in exp.get("equal", {}).items():
        got = _at(doc, path)
        if isinstance(want, bool) and got is None:
            got = False
        assert got == want, f"{what}: {path} = {got!r}, want {want!r}"
    for path, n in exp.get("len", {}).items():
        got = _at(doc, path) or []
        assert len(got) == n, f"{what}: len({path}) = {len(got)}, want {n}"
    for path, n in exp.get("min_len", {}).items():
        got = _at(doc, path) or []
        assert len(got) >= n, f"{what}: len({path}) = {len(got)}, want at least {n}"
    for path, n in exp.get("max", {}).items():
        assert _at(doc, path) <= n, f"{what}: {path} = {_at(doc, path)}, want at most {n}"
    for path, n in exp.get("min", {}).items():
        assert _at(doc, path) >= n, f"{what}: {path} = {_at(doc, path)}, want at least {n}"
    for path in exp.get("present", []):
        assert _at(doc, path) is not None, f"{what}: {path} absent"
    for path in exp.get("absent", []):
        assert _at(doc, path) is None, f"{what}: {path} = {_at(doc, path)!r}, want absent"
    for path, fields in exp.get("some", {}).items():
        items = _at(doc, path) or []

        def match(item: dict[str, Any]) -> bool:
            for k, w in fields.items():
                g = item.get(k)
                if isinstance(w, bool) and g is None:
                    g = False
                if g != w:
                    return False
            return True

        assert any(match(i) for i in items), f"{what}: no item of {path} has {fields}"
    for path, p in exp.get("prefix", {}).items():
        assert str(_at(doc, path)).startswith(p), f"{what}: {path} = {_at(doc, path)!r}, want prefix {p!r}"
    for path, p in exp.get("contains", {}).items():
        assert p in str(_at(doc, path)), f"{what}: {path} = {_at(doc, path)!r}, want it to contain {p!r}"


async def _call(fs: foldstream.Client, endpoint: str, req: dict[str, Any]) -> Any:
    if endpoint == "context":
        return await fs.context(req.get("session", ""), query=req.get("query"), budget_chars=req.get("budget_chars"),
                                budget_tokens=req.get("budget_tokens"), recall_turns=req.get("recall_turns"))
    if endpoint == "session":
        return await fs.session(req.get("session", ""))
    return await fs.recall(req.get("session", ""), req.get("query", ""), limit=req.get("limit"),
                           scope=req.get("scope"))


@pytest.mark.parametrize("case", _cases("requests.json"))
def test_request(case: dict[str, Any] | None, processor: Processor, fixture_session: str) -> None:
    if case is None:
        _load("requests.json")
        return
    if case.get("wire_only"):
        pytest.skip("wire only: the client's API cannot send it")

    async def run() -> None:
        async with await foldstream.connect(processor.url) as fs:
            exp = case["expect"]
            if "error" in exp:
                code, field = exp["error"]["code"], exp["error"].get("field")
                with pytest.raises(foldstream.FoldstreamError) as info:
                    await _call(fs, case["endpoint"], case["request"])
                err = info.value
                if code == "404":
                    assert isinstance(err, UnknownSessionError), repr(err)
                else:
                    assert isinstance(err, (ValidationError, BadRequestError)), repr(err)
                    assert err.field == field, repr(err)
                return
            reply = await _call(fs, case["endpoint"], case["request"])
            want = exp["reply"]
            _check(reply.raw, want, case["name"])
            if want.get("text_chars"):
                assert len(reply.text()) == reply.chars, f"text() has {len(reply.text())} chars, reply says {reply.chars}"
            if "messages" in want:
                msgs = reply.messages()
                m = want["messages"]
                if "count" in m:
                    assert len(msgs) == m["count"]
                _check(msgs, m, case["name"] + " messages")

    asyncio.run(run())


def test_rendering() -> None:
    r = _load("rendering.json")
    for tl in r["turn_lines"]:
        t = foldstream.ContextTurn(0, "", tl["speaker"], tl["role"], tl["text"])
        assert t.line() == tl["line"], tl
    ctx = foldstream.Context.from_json(r["context"])
    assert ctx.text() == r["text"]
    assert ctx.messages() == r["messages"]


def test_trimmed_flags() -> None:
    """The wire's ``trimmed`` flags reach the summary, the turns and the recalled items; absent means False."""
    r = _load("rendering.json")
    plain = foldstream.Context.from_json(r["context"])
    assert plain.summary is not None and not plain.summary.trimmed
    assert not any(t.trimmed for t in plain.turns) and not any(i.trimmed for i in plain.recalled)
    raw = json.loads(json.dumps(r["context"]))
    raw["summary"]["trimmed"] = True
    raw["turns"][0]["trimmed"] = True
    raw["recalled"][2]["trimmed"] = True
    ctx = foldstream.Context.from_json(raw)
    assert ctx.summary is not None and ctx.summary.trimmed
    assert ctx.turns[0].trimmed
    assert [i.trimmed for i in ctx.recalled][:4] == [False, False, True, False]
    assert ctx.text() == plain.text()

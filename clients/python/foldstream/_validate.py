"""Validation of events and requests, rule for rule the processor's.

schema/v1 (turn.json, note.json, control.json, context-request.json,
recall-request.json) states the contract; the processor's checks
(internal/events, client.CheckContext, client.CheckRecall) decide, and
these functions repeat them so that an invalid event is refused before it
is sent, naming the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ._speaker import go_trim_space


def _blank(s: str) -> bool:
    """Whether s is empty after Go's strings.TrimSpace."""
    return not s or (s[0].isspace() and go_trim_space(s) == "")
from .errors import ValidationError

WIRE_VERSION = 1
MAX_SESSION_LEN = 128
MAX_TOKENS = 10_000_000
MAX_MIN_FOLD_TOKENS = 1_000_000
MAX_CONTEXT_QUERY_CHARS = 4096
DEFAULT_RECALL_TURNS = 10
MAX_RECALL_TURNS = 50
DEFAULT_RECALL_LIMIT = 10
MAX_RECALL_LIMIT = 50
MAX_RECALL_QUERY_CHARS = 1024
ROLES = ("user", "assistant", "system", "tool")
OPS = ("compact", "end", "reset", "generate", "configure")
MODES = ("window", "evict", "interval", "tokens")

# Codes of a ValidationError (the processor's dead-letter codes).
CODE_BAD_JSON = "bad_json"
CODE_MISSING_FIELD = "missing_field"
CODE_INVALID_FIELD = "invalid_field"
CODE_BAD_SESSION = "bad_session"
CODE_SESSION_MISMATCH = "session_mismatch"
CODE_OVERSIZED = "oversized"
CODE_UNKNOWN_TYPE = "unknown_type"
CODE_VERSION = "unsupported_version"


@dataclass(frozen=True)
class Limits:
    """Size limits the processor enforces (its defaults unless it was configured otherwise)."""

    max_payload_bytes: int = 256 << 10
    max_text_bytes: int = 64 << 10
    max_id_len: int = 256
    max_speaker_len: int = 128


@dataclass(frozen=True)
class _Setting:
    key: str
    unit: str
    lo: float
    hi: float
    zero_is_value: bool = False
    exclusive: bool = False
    is_int: bool = True


_FRACTION = "fraction of the context window"
# The numeric per-session settings (internal/events/settings.go); a test
# compares them with schema/v1/control.json.
SETTINGS: tuple[_Setting, ...] = (
    _Setting("recent_window", "turns", 1, 10000),
    _Setting("batch_size", "turns", 1, 1000),
    _Setting("max_summary_chars", "characters", 100, 100000),
    _Setting("max_note_chars", "characters", 1, 100000),
    _Setting("min_fold_tokens", "tokens", 0, MAX_MIN_FOLD_TOKENS, zero_is_value=True),
    _Setting("context_window", "tokens", 1024, MAX_TOKENS),
    _Setting("reserve_tokens", "tokens", 1, MAX_TOKENS),
    _Setting("idle_after_seconds", "seconds", 1, 30 * 24 * 3600),
    _Setting("idle_threshold", _FRACTION, 0, 1, exclusive=True, is_int=False),
    _Setting("emergency_threshold", _FRACTION, 0, 1, exclusive=True, is_int=False),
    _Setting("keep_recent_tokens", "tokens", 1, MAX_TOKENS),
    _Setting("keep_recent_messages", "turns", 1, 100000),
    _Setting("target_utilization", _FRACTION, 0, 1, exclusive=True, is_int=False),
    _Setting("min_keep_messages", "turns", 1, 100000),
    _Setting("interval_exchanges", "exchanges", 1, 10000),
    _Setting("keep_recent", "turns", 1, 10000),
    _Setting("mask_tool_outputs_after_seconds", "seconds", 1, 365 * 24 * 3600),
    _Setting("reset_hour", "hour (UTC)", 0, 23, zero_is_value=True),
    _Setting("reset_idle_minutes", "minutes", 1, 365 * 24 * 60),
)
_POINTER_SETTINGS = {"min_fold_tokens", "reset_hour"}

# JSON types of the known fields, as the processor's structs declare them.
_TURN_TYPES = {"v": "int", "session": "str", "turn_id": "str", "at": "time", "speaker": "str", "role": "str",
               "text": "str", "kind": "str", "tool": "str", "tokens": "int", "context_tokens": "int",
               "meta": "map"}
_NOTE_TYPES = {"v": "int", "session": "str", "note_id": "str", "at": "time", "source": "str", "text": "str"}
_CONTROL_TYPES = {"v": "int", "session": "str", "op": "str", "at": "time", "config": "config"}
_CONFIG_TYPES: dict[str, str] = {s.key: ("int" if s.is_int else "float") for s in SETTINGS}
_CONFIG_TYPES.update({"mode": "str", "trigger": "str", "profile": "str", "disabled": "bool",
                      "reset_policy": "str"})

# ASCII digits only, and nothing after the zone (not even the newline "$" lets through).
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z", re.ASCII)
# The largest budget the service's integers hold.
_MAX_INT64 = (1 << 63) - 1
# Go's zero time.Time: the processor takes it for a missing "at".
_GO_ZERO = datetime(1, 1, 1, tzinfo=timezone.utc)


def quote(s: str) -> str:
    """s quoted for an error message, cut at 40 characters."""
    if len(s) > 40:
        s = s[:40] + "…"
    return json.dumps(s, ensure_ascii=False)


def _missing(field: str, expected: str) -> ValidationError:
    return ValidationError(CODE_MISSING_FIELD, field, "required, expected " + expected)


def _invalid(field: str, reason: str) -> ValidationError:
    return ValidationError(CODE_INVALID_FIELD, field, reason)


_SESSION = re.compile(r"[A-Za-z0-9_-]{1,128}")


def valid_session(session: str) -> bool:
    """Whether session is one subject token of 1-128 characters from [A-Za-z0-9_-]."""
    return isinstance(session, str) and _SESSION.fullmatch(session) is not None


def check_session(field: str, session: Any) -> None:
    """Raise a bad_session ValidationError unless session is usable."""
    if valid_session(session):
        return
    if session == "" or session is None:
        raise ValidationError(CODE_BAD_SESSION, field, "required, expected a session id matching [A-Za-z0-9_-]{1,128}")
    raise ValidationError(CODE_BAD_SESSION, field, f"must be 1-{MAX_SESSION_LEN} characters from [A-Za-z0-9_-] "
                                                   f"(one subject token), got {quote(str(session))}")


def parse_time(value: str) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime (None if it is not one)."""
    m = _RFC3339.match(value)
    if not m:
        return None
    frac = (m.group(7) or "")[1:7].ljust(6, "0") if m.group(7) else "000000"
    tz = m.group(8)
    try:
        tzinfo = timezone.utc if tz == "Z" else datetime.strptime(tz.replace(":", ""), "%z").tzinfo
        return datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)),
                        int(m.group(6)), int(frac), tzinfo=tzinfo)
    except ValueError:
        return None


def format_time(t: datetime) -> str:
    """t as RFC 3339 in UTC, as Go writes it (fraction without trailing zeros)."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    t = t.astimezone(timezone.utc)
    s = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    if t.microsecond:
        s += ("." + f"{t.microsecond:06d}").rstrip("0")
    return s + "Z"


def _type_error(field: str, want: str, value: Any) -> ValidationError:
    got = {bool: "bool", str: "string", list: "array", dict: "object"}.get(type(value), "number")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        got = f"number {json.dumps(value)}"
    return _invalid(field, f"expected a JSON {want}, got {got}")


def _check_types(types: Mapping[str, str], ev: Mapping[str, Any], prefix: str = "", trusted_at: bool = False) -> None:
    for key, value in ev.items():
        t = types.get(key)
        if t is None or value is None or (trusted_at and t == "time"):
            continue
        field = prefix + key
        if t == "str" and not isinstance(value, str):
            raise _type_error(field, "string", value)
        if t == "int" and (type(value) is not int):
            raise _type_error(field, "number", value)
        if t == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise _type_error(field, "number", value)
        if t == "bool" and not isinstance(value, bool):
            raise _type_error(field, "bool", value)
        if t == "time":
            if not isinstance(value, str) or parse_time(value) is None:
                shown = value if isinstance(value, str) else json.dumps(value)
                raise _invalid("at", f"expected an RFC 3339 timestamp like 2026-01-02T15:04:05Z, got {quote(shown)}")
        if t == "map":
            if not isinstance(value, Mapping):
                raise _type_error(field, "object", value)
            for k, v in value.items():
                if v is not None and not isinstance(v, str):
                    raise _type_error(f"{field}.{k}", "string", v)
        if t == "config":
            if not isinstance(value, Mapping):
                raise _type_error(field, "object", value)
            _check_types(_CONFIG_TYPES, value, "config.")


def _str(ev: Mapping[str, Any], key: str) -> str:
    v = ev.get(key)
    return v if isinstance(v, str) else ""


def _utf8_len(s: str) -> int | None:
    try:
        return len(s.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def _check_version(ev: Mapping[str, Any]) -> None:
    v = ev.get("v") or 0
    if v == 0:
        raise _missing("v", f"the contract version {WIRE_VERSION}")
    if v != WIRE_VERSION:
        raise ValidationError(CODE_VERSION, "v", f"version {v} is not supported, expected {WIRE_VERSION}")


def _check_body_session(ev: Mapping[str, Any], subject_session: str) -> None:
    body = _str(ev, "session")
    if body == "":
        raise _missing("session", "the session id, equal to the subject's session token")
    if body != subject_session:
        raise ValidationError(CODE_SESSION_MISMATCH, "session",
                              f"{quote(body)} does not match the subject's session token {quote(subject_session)}")


def _check_id(field: str, value: str, max_len: int) -> None:
    if _blank(value):
        raise _missing(field, "a non-empty string (the idempotency key)")
    n = _utf8_len(value)
    if n is None:
        raise _invalid(field, "expected valid UTF-8")
    if n > max_len:
        raise _invalid(field, f"{n} bytes, expected at most {max_len}")


def _check_text(field: str, text: str, max_bytes: int, required: bool) -> None:
    if required and _blank(text):
        raise _missing(field, "non-empty text")
    n = _utf8_len(text)
    if n is None:
        raise _invalid(field, "expected valid UTF-8 text")
    if n > max_bytes:
        raise ValidationError(CODE_OVERSIZED, field, f"{n} bytes, expected at most {max_bytes}")


def _check_at(ev: Mapping[str, Any]) -> None:
    """Refuse an absent "at", and Go's zero time, which the processor reads as absent."""
    at = ev.get("at")
    if not at or (isinstance(at, str) and parse_time(at) == _GO_ZERO):
        raise _missing("at", "an RFC 3339 timestamp like 2026-01-02T15:04:05Z")


def _check_turn(ev: Mapping[str, Any], lim: Limits) -> None:
    _check_id("turn_id", _str(ev, "turn_id"), lim.max_id_len)
    _check_at(ev)
    speaker = _str(ev, "speaker")
    if _blank(speaker):
        raise _missing("speaker", 'the speaker\'s display name, e.g. "Alice"')
    n = _utf8_len(speaker)
    if n is None or n > lim.max_speaker_len:
        raise _invalid("speaker", f"expected valid UTF-8 of at most {lim.max_speaker_len} bytes")
    role = _str(ev, "role")
    if role == "":
        raise _missing("role", "one of user, assistant, system, tool")
    if role not in ROLES:
        raise _invalid("role", f"expected one of user, assistant, system, tool, got {quote(role)}")
    _check_text("text", _str(ev, "text"), lim.max_text_bytes, True)
    for f in ("tokens", "context_tokens"):
        v = ev.get(f) or 0
        if v < 0 or v > MAX_TOKENS:
            raise _invalid(f, f"expected an integer 0..{MAX_TOKENS}, got {v}")
    # Strings nothing else checks: one that UTF-8 cannot encode (a lone
    # surrogate) would fail in encode() without naming its field.
    for f in ("kind", "tool"):
        if _utf8_len(_str(ev, f)) is None:
            raise _invalid(f, "expected valid UTF-8")
    meta = ev.get("meta") or {}
    for k, v in meta.items():
        if _utf8_len(str(k)) is None or (isinstance(v, str) and _utf8_len(v) is None):
            raise _invalid(f"meta.{k!s}".encode("utf-8", "backslashreplace").decode(), "expected valid UTF-8")


def _check_note(ev: Mapping[str, Any], lim: Limits) -> None:
    _check_id("note_id", _str(ev, "note_id"), lim.max_id_len)
    _check_at(ev)
    n = _utf8_len(_str(ev, "source"))
    if n is None or n > lim.max_speaker_len:
        raise _invalid("source", f"expected valid UTF-8 of at most {lim.max_speaker_len} bytes")
    _check_text("text", _str(ev, "text"), lim.max_text_bytes, True)


def _g(v: float) -> str:
    return "%g" % v


def check_config(cfg: Mapping[str, Any]) -> None:
    """Validate a configure's config as the processor does (SessionConfig.Validate)."""
    for s in SETTINGS:
        raw = cfg.get(s.key)
        if raw is None:
            continue
        v = float(raw)
        if v == 0 and not (s.zero_is_value and s.key in _POINTER_SETTINGS):
            continue
        field = "config." + s.key
        if s.exclusive:
            if not (s.lo < v < s.hi):
                raise _invalid(field, f"expected a {s.unit} between {_g(s.lo)} and {_g(s.hi)} (exclusive), got {_g(v)}")
            continue
        if v < s.lo or v > s.hi or v != int(v):
            lo = "0 (off)" if s.zero_is_value and s.lo == 0 else str(int(s.lo))
            raise _invalid(field, f"expected {lo}..{int(s.hi)} {s.unit}, got {_g(v)}")
    trigger, profile, mode = _str(cfg, "trigger"), _str(cfg, "profile"), _str(cfg, "mode")
    if trigger not in ("", "turn", "generate"):
        raise _invalid("config.trigger", f"expected turn or generate, got {quote(trigger)}")
    if profile not in ("", "voice", "agent"):
        raise _invalid("config.profile", f"expected voice or agent, got {quote(profile)}")
    if mode and mode not in MODES:
        raise _invalid("config.mode", f"expected one of {', '.join(MODES)}, got {quote(mode)}")
    cw, rt = cfg.get("context_window") or 0, cfg.get("reserve_tokens") or 0
    if cw != 0 and rt >= cw:
        raise _invalid("config.reserve_tokens", f"expected less than context_window ({cw}), got {rt}")
    it, et = cfg.get("idle_threshold") or 0, cfg.get("emergency_threshold") or 0
    if it != 0 and et != 0 and it >= et:
        raise _invalid("config.idle_threshold", f"expected below emergency_threshold ({_g(et)}), got {_g(it)}")
    policy = _str(cfg, "reset_policy")
    if policy == "daily":
        if cfg.get("reset_hour") is None:
            raise _missing("config.reset_hour", "an hour 0..23 (UTC) for reset_policy daily")
    elif policy not in ("", "manual", "idle"):
        raise _invalid("config.reset_policy", f"expected manual, daily or idle, got {quote(policy)}")
    if policy == "idle" and not cfg.get("reset_idle_minutes"):
        raise _missing("config.reset_idle_minutes",
                       "minutes of silence after which reset_policy idle resets the session")


def _check_control(ev: Mapping[str, Any]) -> None:
    op = _str(ev, "op")
    if op == "":
        raise _missing("op", "one of compact, end, reset, generate, configure")
    if op == "configure":
        cfg = ev.get("config")
        if cfg is None:
            raise _missing("config", "an object with the settings to override for op configure")
        check_config(cfg)
    elif op not in OPS:
        raise _invalid("op", f"expected one of compact, end, reset, generate, configure, got {quote(op)}")


def validate_event(kind: str, session: str, event: Mapping[str, Any], limits: Limits | None = None, *,
                   _trusted_at: bool = False) -> None:
    """Validate a decoded inbound event of kind for session as the processor would.

    kind is "turn", "note" or "control"; session the subject's session
    token. Unknown fields are accepted. Raises ValidationError.
    """
    lim = limits or Limits()
    check_session("subject session token", session)
    if kind == "turn":
        _check_types(_TURN_TYPES, event, trusted_at=_trusted_at)
    elif kind == "note":
        _check_types(_NOTE_TYPES, event)
    elif kind == "control":
        _check_types(_CONTROL_TYPES, event)
    else:
        raise ValidationError(CODE_UNKNOWN_TYPE, "subject",
                              f"unknown event type {quote(kind)}, expected turn, note or control")
    _check_version(event)
    _check_body_session(event, session)
    if kind == "turn":
        _check_turn(event, lim)
    elif kind == "note":
        _check_note(event, lim)
    else:
        _check_control(event)


def validate_payload(kind: str, session: str, data: bytes, limits: Limits | None = None) -> dict[str, Any]:
    """Validate an inbound payload (JSON bytes) as the processor would; return it decoded."""
    lim = limits or Limits()
    if len(data) > lim.max_payload_bytes:
        raise ValidationError(CODE_OVERSIZED, "payload", f"{len(data)} bytes, expected at most {lim.max_payload_bytes}")
    check_session("subject session token", session)
    text = data.strip()
    if not text:
        raise ValidationError(CODE_BAD_JSON, "payload", "empty, expected a JSON object")
    if not text.startswith(b"{"):
        raise ValidationError(CODE_BAD_JSON, "payload", "expected a JSON object starting with '{'")
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError(CODE_INVALID_FIELD, "payload", "expected valid UTF-8 JSON") from None
    try:
        ev = json.loads(decoded)
    except ValueError as e:
        raise ValidationError(CODE_BAD_JSON, "payload", f"not valid JSON: {e}") from None
    if not isinstance(ev, dict):
        raise ValidationError(CODE_BAD_JSON, "payload", "expected a JSON object starting with '{'")
    validate_event(kind, session, ev, lim)
    return ev


def encode(event: Mapping[str, Any], limits: Limits | None = None) -> bytes:
    """The event as JSON, refused when over the payload limit."""
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()
    lim = limits or Limits()
    if len(data) > lim.max_payload_bytes:
        raise ValidationError(CODE_OVERSIZED, "payload", f"{len(data)} bytes, expected at most {lim.max_payload_bytes}")
    return data


def check_context_request(req: dict[str, Any]) -> None:
    """Validate a context request as the service does; fill in recall_turns."""
    check_session("session", req.get("session"))
    bc, bt = req.get("budget_chars") or 0, req.get("budget_tokens") or 0
    for f, v in (("budget_chars", bc), ("budget_tokens", bt)):
        if type(v) is not int or v < 0 or v > _MAX_INT64:
            raise _invalid(f, f"expected a non-negative integer (0 = unlimited) of at most 64 bits, got {v}")
    q = req.get("query") or ""
    if not isinstance(q, str):
        raise _type_error("query", "string", q)
    if len(q) > MAX_CONTEXT_QUERY_CHARS:
        raise _invalid("query", f"expected 1..{MAX_CONTEXT_QUERY_CHARS} characters, got {len(q)}")
    if q and _blank(q):
        raise _invalid("query", f"expected 1..{MAX_CONTEXT_QUERY_CHARS} characters with at least one that is "
                                f"not a space, got {quote(q)}")
    rt = req.get("recall_turns") or 0
    if type(rt) is not int or rt < 0 or rt > MAX_RECALL_TURNS:
        raise _invalid("recall_turns", f"expected 1..{MAX_RECALL_TURNS} (omit it for {DEFAULT_RECALL_TURNS}), got {rt}")
    if rt > 0 and not q:
        raise _invalid("recall_turns", 'only applies with a query (field "query" is empty)')
    if rt == 0 and q:
        req["recall_turns"] = DEFAULT_RECALL_TURNS if bc == 0 and bt == 0 else MAX_RECALL_TURNS


def check_recall_request(req: dict[str, Any]) -> None:
    """Validate a recall request as the service does; fill in v, limit and scope."""
    v = req.get("v") or 0
    if v == 0:
        req["v"] = v = WIRE_VERSION
    if v != WIRE_VERSION:
        raise _invalid("v", f"expected {WIRE_VERSION}, got {v}")
    check_session("session", req.get("session"))
    q = req.get("query") or ""
    if not isinstance(q, str) or _blank(q):
        raise _invalid("query", f"expected a non-empty query, got {quote(str(q))}")
    if len(q) > MAX_RECALL_QUERY_CHARS:
        raise _invalid("query", f"expected at most {MAX_RECALL_QUERY_CHARS} characters, got {len(q)}")
    limit = req.get("limit") or 0
    if limit == 0:
        req["limit"] = DEFAULT_RECALL_LIMIT
    elif type(limit) is not int or limit < 1 or limit > MAX_RECALL_LIMIT:
        raise _invalid("limit", f"expected 1..{MAX_RECALL_LIMIT} (omit it for {DEFAULT_RECALL_LIMIT}), got {limit}")
    scope = req.get("scope") or ""
    if scope == "":
        req["scope"] = "evicted"
    elif scope not in ("evicted", "all"):
        raise _invalid("scope", f'expected "evicted" or "all", got {quote(str(scope))}')


def now_utc() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(timezone.utc)

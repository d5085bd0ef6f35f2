"""Typed replies of the processor's service and of the outbound stream.

Each class mirrors a schema of schema/v1 (context-reply.json,
session-reply.json, recall-response.json, summary-updated.json); fields
the schema adds later are kept in ``raw``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from . import _speaker
from ._validate import parse_time

__all__ = [
    "PubAck", "Turn", "SummaryLayer", "ContextTurn", "EvictionNote", "RecalledItem", "MissingTurns", "Context",
    "LeaseInfo", "SessionInfo", "RecallResult", "Recall", "SummaryUpdated", "turn_line",
    "SUMMARY_PREFIX", "MEMORIES_HEADER", "EXCERPTS_HEADER", "RECENT_HEADER",
]

SUMMARY_PREFIX = "Earlier in this session: "
MEMORIES_HEADER = "Remembered facts:"
EXCERPTS_HEADER = "Earlier excerpts (in order):"
RECENT_HEADER = "Recent turns:"
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
# Every line break a reader may split on, shown as " ⏎ ": str.splitlines()'s set, which also holds what
# JavaScript and Unicode-aware readers end a line on. The Go and TypeScript clients replace the same set.
_LINE_BREAKS = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_NS = re.compile(r"\.(\d+)")


def _time(v: Any) -> datetime | None:
    if not isinstance(v, str):
        return None
    if len(v) >= 20 and v[-1] == "Z" and v[19] in ".Z" and v[4] == "-" and v[10] == "T" and v[:4] != "0001":
        # The service's own form (UTC, "Z"): sliced rather than matched.
        try:
            us = int(v[20:-1][:6].ljust(6, "0")) if v[19] == "." else 0
            return datetime(int(v[0:4]), int(v[5:7]), int(v[8:10]), int(v[11:13]), int(v[14:16]), int(v[17:19]),
                            us, tzinfo=timezone.utc)
        except ValueError:
            pass
    t = parse_time(v)
    if t is None or t.year == 1:
        return None  # Go's zero time: none
    return t


def _ns(v: Any) -> int:
    """Epoch nanoseconds of an RFC 3339 string (0 when none)."""
    t = _time(v)
    if t is None:
        return 0
    base = int((t.replace(microsecond=0) - datetime(1970, 1, 1, tzinfo=timezone.utc)).total_seconds()) * 1_000_000_000
    m = _NS.search(v)
    return base + (int(m.group(1)[:9].ljust(9, "0")) if m else 0)


def turn_line(name: str, text: str) -> str:
    """A turn as one prompt line: "Speaker: text", name normalised, line breaks shown as " ⏎ "."""
    n = _speaker.name(name) or "unknown"
    return n + ": " + _LINE_BREAKS.sub(" ⏎ ", text)


def _label(t: datetime) -> str:
    u = t.astimezone(timezone.utc)
    return f"{u.day} {_MONTHS[u.month - 1]} {u.year:04d}"


@dataclass
class PubAck:
    """The stream's acknowledgement of a published event."""

    stream: str
    seq: int
    duplicate: bool = False
    domain: str = ""


@dataclass
class Turn:
    """A turn to publish in a batch (see Client.publish_turns); defaults as in publish_turn."""

    session: str
    turn_id: str
    speaker: str
    text: str
    role: str = "user"
    at: datetime | str | None = None
    kind: str | None = None
    tool: str | None = None
    tokens: int | None = None
    context_tokens: int | None = None
    meta: dict[str, str] | None = None


@dataclass
class SummaryLayer:
    """The summary as the context endpoint returns it; ``text`` is how it goes into a prompt."""

    text: str
    summary: str
    version: int
    covered_through_turn: int
    chars: int
    tokens: int
    #: With a query under a budget too small for the whole summary:
    #: ``summary`` holds only its sentences that match the query.
    trimmed: bool = False

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SummaryLayer:
        """Decode the wire form."""
        return cls(d.get("text", ""), d.get("summary", ""), d.get("version", 0), d.get("covered_through_turn", 0),
                   d.get("chars", 0), d.get("tokens", 0), bool(d.get("trimmed", False)))


@dataclass
class ContextTurn:
    """One verbatim turn of a context.

    ``at_text`` is the turn's time as the service sent it (RFC 3339);
    ``at`` parses it on access (contexts are decoded without parsing every
    turn's time).
    """

    index: int
    turn_id: str
    speaker: str
    role: str
    text: str
    at_text: str = ""
    kind: str = ""
    tool: str = ""
    chars: int = 0
    tokens: int = 0
    #: With a query under a budget: ``text`` holds only the last sentences
    #: of a turn of the last exchange too long for its share, after "…".
    trimmed: bool = False

    @property
    def at(self) -> datetime | None:
        """When the turn was said (None when the service sent no time)."""
        return _time(self.at_text)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ContextTurn:
        """Decode the wire form."""
        g = d.get
        return cls(g("index", 0), g("turn_id", ""), g("speaker", ""), g("role", ""), g("text", ""),
                   g("at") or "", g("kind", ""), g("tool", ""), g("chars", 0), g("tokens", 0),
                   bool(g("trimmed", False)))

    def line(self) -> str:
        """The turn as one prompt line, labelled by its role when its name normalises to nothing."""
        if _speaker.name(self.speaker) == "" and self.role:
            return turn_line(self.role, self.text)
        return turn_line(self.speaker, self.text)


@dataclass
class EvictionNote:
    """Mode evict's eviction note, in the summary's place."""

    text: str
    version: int
    count: int
    evicted_tokens: int
    from_: datetime | None
    to: datetime | None
    chars: int = 0
    tokens: int = 0

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> EvictionNote:
        """Decode the wire form."""
        return cls(d.get("text", ""), d.get("version", 0), d.get("count", 0), d.get("evicted_tokens", 0),
                   _time(d.get("from")), _time(d.get("to")), d.get("chars", 0), d.get("tokens", 0))


@dataclass
class RecalledItem:
    """A memory or an earlier turn packed into a question-aware context."""

    kind: str  # "turn" or "memory"
    text: str
    index: int = 0
    turn_id: str = ""
    memory_id: str = ""
    seq: int = 0
    speaker: str = ""
    role: str = ""
    at: datetime | None = None
    score: float = 0.0
    neighbour: bool = False
    chars: int = 0
    tokens: int = 0
    #: ``text`` is the sentences of a long matching turn that hold the
    #: match, with "…" where sentences were left out.
    trimmed: bool = False
    at_ns: int = field(default=0, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RecalledItem:
        """Decode the wire form."""
        return cls(d.get("kind", ""), d.get("text", ""), d.get("index", 0), d.get("turn_id", ""),
                   d.get("memory_id", ""), d.get("seq", 0), d.get("speaker", ""), d.get("role", ""),
                   _time(d.get("at")), float(d.get("score", 0)), bool(d.get("neighbour", False)),
                   d.get("chars", 0), d.get("tokens", 0), bool(d.get("trimmed", False)), _ns(d.get("at")))

    def run_line(self) -> str:
        """The line where a turn continues a run of excerpts: "Alice: text"."""
        if self.kind == "turn":
            return ContextTurn(0, "", self.speaker, self.role, self.text).line()
        text = _LINE_BREAKS.sub(" ⏎ ", self.text)
        n = _speaker.name(self.speaker)
        return f"{n}: {text}" if n else text

    def line(self) -> str:
        """The item as one labelled prompt line: "[22 Nov 2026] Alice: text"."""
        out = "- " if self.kind == "memory" else ""
        if self.at is not None:
            out += f"[{_label(self.at)}] "
        return out + self.run_line()


@dataclass
class MissingTurns:
    """Turns [from_, to) a question-aware context could not search, and why."""

    from_: int
    to: int
    reason: str


def _excerpt_lines(items: list[RecalledItem]) -> list[str]:
    """Prompt lines of recalled items of one kind: the turns of one day (UTC) labelled once."""
    lines: list[str] = []
    day: str | None = None
    for r in items:
        if r.kind != "turn" or r.at is None:
            lines.append(r.line())
            day = None
            continue
        d = _label(r.at)
        if d == day:
            lines.append(r.run_line())
            continue
        lines.append(r.line())
        day = d
    return lines


@dataclass
class Context:
    """A session's packed context (the context endpoint's reply), in prompt order.

    ``text()`` renders it as the CLI's ``processor context`` prints it;
    ``messages()`` as OpenAI chat-completions messages.
    """

    v: int
    session: str
    summary: SummaryLayer | None
    turns: list[ContextTurn]
    evictions: list[EvictionNote]
    cursor: int
    total_turns: int
    dropped_turns: int
    summary_dropped: bool
    chars: int
    tokens: int
    fold_in_flight: bool
    checkpoint_seq: int
    through_seq: int
    eviction_dropped: bool = False
    budget_chars: int = 0
    budget_tokens: int = 0
    ended: bool = False
    query: str = ""
    recalled: list[RecalledItem] = field(default_factory=list)
    recall_searched: int = 0
    recall_dropped: int = 0
    missing: MissingTurns | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Context:
        """Decode the wire form."""
        s = d.get("summary")
        m = d.get("missing")
        return cls(
            v=d.get("v", 0), session=d.get("session", ""),
            summary=SummaryLayer.from_json(s) if s else None,
            turns=[ContextTurn.from_json(t) for t in d.get("turns") or []],
            evictions=[EvictionNote.from_json(e) for e in d.get("evictions") or []],
            cursor=d.get("cursor", 0), total_turns=d.get("total_turns", 0), dropped_turns=d.get("dropped_turns", 0),
            summary_dropped=bool(d.get("summary_dropped")), chars=d.get("chars", 0), tokens=d.get("tokens", 0),
            fold_in_flight=bool(d.get("fold_in_flight")), checkpoint_seq=d.get("checkpoint_seq", 0),
            through_seq=d.get("through_seq", 0), eviction_dropped=bool(d.get("eviction_dropped")),
            budget_chars=d.get("budget_chars", 0), budget_tokens=d.get("budget_tokens", 0),
            ended=bool(d.get("ended")), query=d.get("query", ""),
            recalled=[RecalledItem.from_json(r) for r in d.get("recalled") or []],
            recall_searched=d.get("recall_searched", 0), recall_dropped=d.get("recall_dropped", 0),
            missing=MissingTurns(m.get("from", 0), m.get("to", 0), m.get("reason", "")) if m else None,
            raw=d)

    def _recalled_sections(self) -> list[str]:
        lines: list[str] = []
        for kind, header in (("memory", MEMORIES_HEADER), ("turn", EXCERPTS_HEADER)):
            items = [r for r in self.recalled if r.kind == kind]
            if items:
                lines.append(header)
                lines.extend(_excerpt_lines(items))
        return lines

    def prompt_lines(self) -> list[str]:
        """The prompt's lines: summary (or eviction note), recalled sections, then the turns."""
        lines: list[str] = []
        if self.summary is not None:
            lines.append(self.summary.text)
        lines.extend(e.text for e in self.evictions)
        lines.extend(self._recalled_sections())
        if self.recalled and self.turns:
            lines.append(RECENT_HEADER)
        lines.extend(t.line() for t in self.turns)
        return lines

    def header(self) -> str:
        """The CLI's first line: "# session …: N turns, cursor C; this context: …"."""
        h = (f"# session {self.session}: {self.total_turns} turns, cursor {self.cursor}; "
             f"this context: {self.chars} chars, {self.tokens} tokens")
        if self.dropped_turns > 0 or self.summary_dropped or self.eviction_dropped:
            # With a query the window's older turns give way to the excerpts
            # as well as to the budget (dropped_turns counts both).
            if self.query:
                h += f"; for the query: {self.dropped_turns} oldest turns not among the recent turns"
            else:
                h += f"; over budget: {self.dropped_turns} oldest turns left out"
            if self.summary_dropped or self.eviction_dropped:
                h += ", summary left out"
        if self.fold_in_flight:
            h += "; a fold is in flight"
        return h

    def text(self, *, header: bool = False) -> str:
        """The prompt text, one line per item, each ending in a newline.

        It is the Go client's ``Context.Prompt()``; with ``header=True`` it
        is exactly what ``processor context`` prints.
        """
        body = "".join(line + "\n" for line in self.prompt_lines())
        return (self.header() + "\n" + body) if header else body

    def messages(self, system_prompt: str | None = None) -> list[dict[str, str]]:
        """The context as OpenAI chat-completions messages.

        One system message holds ``system_prompt`` (if given), the summary
        (or eviction note), the remembered facts and the earlier excerpts
        with their dates; the recent turns follow, a turn of role
        assistant as an assistant message with its text, every other turn
        as a user message "Speaker: text" (names normalised, so a display
        name cannot forge a line).
        """
        sys_lines: list[str] = []
        if system_prompt:
            sys_lines.append(system_prompt)
        if self.summary is not None:
            sys_lines.append(self.summary.text)
        sys_lines.extend(e.text for e in self.evictions)
        sys_lines.extend(self._recalled_sections())
        out: list[dict[str, str]] = []
        if sys_lines:
            out.append({"role": "system", "content": "\n".join(sys_lines)})
        for t in self.turns:
            if t.role == "assistant":
                out.append({"role": "assistant", "content": t.text})
            else:
                out.append({"role": "user", "content": t.line()})
        return out


@dataclass
class LeaseInfo:
    """A fold in flight: turns [from_, to) and ``notes`` pending notes."""

    fold_id: str
    owner: str
    deadline: datetime | None
    from_: int
    to: int
    notes: int
    held: bool


@dataclass
class SessionInfo:
    """A session's checkpointed state (the session endpoint's reply)."""

    v: int
    session: str
    version: int
    summary_chars: int
    cursor: int
    total_turns: int
    covered_through_turn: int
    compactions: int
    pending_notes: int
    last_seq: int
    applied_seq: int
    stream_last_seq: int
    pending_events: int
    caught_up: bool
    summary_is_note: bool = False
    evicted: int = 0
    evicted_tokens: int = 0
    last_fold_at: datetime | None = None
    lease: LeaseInfo | None = None
    failures: int = 0
    retry_after: datetime | None = None
    ended: bool = False
    config: dict[str, Any] | None = None
    last_activity: datetime | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SessionInfo:
        """Decode the wire form."""
        lease = d.get("lease")
        return cls(
            v=d.get("v", 0), session=d.get("session", ""), version=d.get("version", 0),
            summary_chars=d.get("summary_chars", 0), cursor=d.get("cursor", 0), total_turns=d.get("total_turns", 0),
            covered_through_turn=d.get("covered_through_turn", 0), compactions=d.get("compactions", 0),
            pending_notes=d.get("pending_notes", 0), last_seq=d.get("last_seq", 0),
            applied_seq=d.get("applied_seq", 0), stream_last_seq=d.get("stream_last_seq", 0),
            pending_events=d.get("pending_events", 0), caught_up=bool(d.get("caught_up")),
            summary_is_note=bool(d.get("summary_is_note")), evicted=d.get("evicted", 0),
            evicted_tokens=d.get("evicted_tokens", 0), last_fold_at=_time(d.get("last_fold_at")),
            lease=LeaseInfo(lease.get("fold_id", ""), lease.get("owner", ""), _time(lease.get("deadline")),
                            lease.get("from", 0), lease.get("to", 0), lease.get("notes", 0),
                            bool(lease.get("held"))) if lease else None,
            failures=d.get("failures", 0), retry_after=_time(d.get("retry_after")), ended=bool(d.get("ended")),
            config=d.get("config"), last_activity=_time(d.get("last_activity")), raw=d)


@dataclass
class RecallResult:
    """One turn matching a recall query."""

    turn_id: str
    index: int
    at: datetime | None
    speaker: str
    role: str
    text: str
    score: float


@dataclass
class Recall:
    """The recall endpoint's reply: the best matching turns, best first."""

    v: int
    session: str
    query: str
    scope: str
    cursor: int
    results: list[RecallResult]
    searched: int
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Recall:
        """Decode the wire form."""
        return cls(d.get("v", 0), d.get("session", ""), d.get("query", ""), d.get("scope", ""), d.get("cursor", 0),
                   [RecallResult(r.get("turn_id", ""), r.get("index", 0), _time(r.get("at")), r.get("speaker", ""),
                                 r.get("role", ""), r.get("text", ""), float(r.get("score", 0)))
                    for r in d.get("results") or []],
                   d.get("searched", 0), d)


@dataclass
class SummaryUpdated:
    """A summary-updated event (<prefix>.out.<session>.summary), with its stream sequence."""

    session: str
    version: int
    summary: str
    cursor: int
    covered_through_turn: int
    folded_turns: int
    mode: str
    tier: str
    at: datetime | None
    stream_seq: int = 0
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The times of the oldest and the newest turn or note this fold folded.
    from_: datetime | None = None
    to: datetime | None = None
    #: Pending notes this fold folded.
    folded_notes: int = 0
    #: The session's resets when the summary was made (0: never): a
    #: summary of an earlier epoch than the session's describes turns from
    #: before a reset.
    epoch: int = 0

    @classmethod
    def from_json(cls, d: dict[str, Any], stream_seq: int = 0) -> SummaryUpdated:
        """Decode the wire form."""
        return cls(d.get("session", ""), d.get("version", 0), d.get("summary", ""), d.get("cursor", 0),
                   d.get("covered_through_turn", 0), d.get("folded_turns", 0), d.get("mode", ""),
                   d.get("tier", ""), _time(d.get("at")), stream_seq, d, _time(d.get("from")), _time(d.get("to")),
                   d.get("folded_notes", 0), d.get("epoch", 0))


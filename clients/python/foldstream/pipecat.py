"""Pipecat adapter: a FrameProcessor that keeps a voice bot's LLM context folded.

``FoldstreamContextProcessor`` is a Pipecat ``FrameProcessor`` (pipecat-ai,
imported when the class is first used; install the ``pipecat`` extra).
Place it between the user context aggregator and the LLM service::

    fs_ctx = FoldstreamContextProcessor(client, session)
    Pipeline([transport.input(), stt, context_aggregator.user(), fs_ctx, llm, tts,
              transport.output(), context_aggregator.assistant()])

On every LLM context frame (``OpenAILLMContextFrame`` or ``LLMContextFrame``)
it publishes, as turns, the context's messages it has not published yet —
the user's final transcriptions as the user aggregator collected them, and
the bot's previous replies as the assistant aggregator recorded them — and
replaces the history in the context with foldstream's packed context for
the user's latest utterance; the context's leading system messages (the
bot's instructions) are kept.

The foldstream side is plain functions, :func:`unpublished_turns` and
:func:`llm_messages`, usable (and tested) without Pipecat.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from .client import Client
from .errors import MissingExtraError
from .types import Context, Turn

__all__ = ["unpublished_turns", "llm_messages", "latest_user_text", "FoldstreamContextProcessor"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return ""


def unpublished_turns(session: str, messages: Sequence[Mapping[str, Any]], published: set[str], *,
                      user_speaker: str = "User", bot_speaker: str = "Bot") -> list[Turn]:
    """The user and assistant messages of an LLM context not published yet, as turns.

    A message's turn id is a hash of its position among the
    conversation's messages, its role and its text, so the same message
    seen in the next context frame is not published again (``published``
    collects the ids; the stream's dedup covers a restart).
    """
    out: list[Turn] = []
    n = 0
    for m in messages:
        role = m.get("role")
        if role not in ("user", "assistant"):
            continue
        text = _text(m.get("content"))
        n += 1
        if not text.strip():
            continue
        tid = "pc-" + hashlib.sha256(f"{n}\x00{role}\x00{text}".encode()).hexdigest()[:24]
        if tid in published:
            continue
        published.add(tid)
        out.append(Turn(session, tid, user_speaker if role == "user" else bot_speaker, text, role=str(role)))
    return out


def latest_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The text of the context's last user message (the utterance being answered)."""
    for m in reversed(messages):
        if m.get("role") == "user":
            t = _text(m.get("content")).strip()
            return t or None
    return None


def llm_messages(messages: Sequence[Mapping[str, Any]], ctx: Context, latest_user: str | None,
                 user_speaker: str = "User") -> list[dict[str, Any]]:
    """The messages the LLM gets: the context's leading system messages, then foldstream's packed context.

    If the packed context does not end with the latest utterance yet (the
    processor had not applied it), it is appended as a user message.
    """
    head = []
    for m in messages:
        if m.get("role") != "system":
            break
        head.append(dict(m))
    packed: list[dict[str, Any]] = [dict(m) for m in ctx.messages()]
    if latest_user and not (ctx.turns and ctx.turns[-1].role == "user" and ctx.turns[-1].text == latest_user):
        packed.append({"role": "user", "content": f"{user_speaker}: {latest_user}"})
    return head + packed


def _make_class() -> type:
    try:
        from pipecat.frames.frames import Frame
        from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    except ImportError as e:
        raise MissingExtraError("foldstream.pipecat needs pipecat-ai: pip install 'foldstream[pipecat]'") from e
    context_frames: list[type] = []
    try:
        from pipecat.processors.aggregators.openai_llm_context import OpenAILLMContextFrame
        context_frames.append(OpenAILLMContextFrame)
    except ImportError:
        pass
    try:
        from pipecat.frames.frames import LLMContextFrame
        context_frames.append(LLMContextFrame)
    except ImportError:
        pass

    class _Processor(FrameProcessor):  # type: ignore[misc]
        """Publishes the conversation as turns and packs the LLM's context with foldstream."""

        def __init__(self, client: Client, session: str, *, user_speaker: str = "User", bot_speaker: str = "Bot",
                     budget_tokens: int | None = None, budget_chars: int | None = None, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.client = client
            self.session = session
            self.user_speaker = user_speaker
            self.bot_speaker = bot_speaker
            self.budget_tokens = budget_tokens
            self.budget_chars = budget_chars
            self.published: set[str] = set()

        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if context_frames and isinstance(frame, tuple(context_frames)):
                llm_ctx = frame.context
                msgs = list(llm_ctx.get_messages() if hasattr(llm_ctx, "get_messages") else llm_ctx.messages)
                turns = unpublished_turns(self.session, msgs, self.published, user_speaker=self.user_speaker,
                                          bot_speaker=self.bot_speaker)
                if turns:
                    await self.client.publish_turns(turns)
                latest = latest_user_text(msgs)
                ctx = await self.client.context(self.session, query=latest, budget_tokens=self.budget_tokens,
                                                budget_chars=self.budget_chars)
                llm_ctx.set_messages(llm_messages(msgs, ctx, latest, self.user_speaker))
            await self.push_frame(frame, direction)

    _Processor.__name__ = _Processor.__qualname__ = "FoldstreamContextProcessor"
    return _Processor


_cls: type | None = None


def __getattr__(name: str) -> Any:
    """``FoldstreamContextProcessor`` is built on first access (it subclasses Pipecat's FrameProcessor)."""
    global _cls
    if name == "FoldstreamContextProcessor":
        if _cls is None:
            _cls = _make_class()
        return _cls
    raise AttributeError(name)

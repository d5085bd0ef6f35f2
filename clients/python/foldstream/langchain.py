"""LangChain adapter: a chat message history backed by foldstream.

``FoldstreamChatMessageHistory`` is a LangChain ``BaseChatMessageHistory``
(langchain-core, imported when the class is first used; install the
``langchain`` extra). ``add_messages`` publishes each message as a turn;
``messages`` is foldstream's packed context for the latest human message
(or for ``history.query`` when set: the live question, which
``RunnableWithMessageHistory`` has not added yet when it reads the
history): one system message (summary, remembered facts, dated excerpts),
then the recent turns as human and AI messages.

The foldstream side is two plain functions, :func:`turn_for_message` and
:func:`history_messages`, usable (and tested) without LangChain.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .client import Client
from .errors import MissingExtraError
from .types import Context, Turn

__all__ = ["turn_for_message", "history_messages", "FoldstreamChatMessageHistory", "DEFAULT_SPEAKERS"]

#: Speaker names of LangChain's message types (a message's ``name`` wins).
DEFAULT_SPEAKERS: Mapping[str, str] = {"human": "User", "ai": "Assistant", "system": "System", "tool": "Tool"}
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}
_TYPES = {"system": "system", "user": "human", "assistant": "ai"}


def turn_for_message(session: str, msg_type: str, content: str, *, turn_id: str | None = None,
                     name: str | None = None, speakers: Mapping[str, str] = DEFAULT_SPEAKERS) -> Turn:
    """The turn a LangChain message of ``msg_type`` ("human", "ai", "system", "tool") is published as."""
    role = _ROLES.get(msg_type, "user")
    speaker = name or speakers.get(msg_type) or speakers.get("human") or "User"
    return Turn(session, turn_id or uuid.uuid4().hex, speaker, content, role=role,
                kind="tool_result" if role == "tool" else None)


def history_messages(ctx: Context, system_prompt: str | None = None) -> list[tuple[str, str]]:
    """The packed context as ``(message type, content)`` pairs: "system", "human" or "ai"."""
    return [(_TYPES[m["role"]], m["content"]) for m in ctx.messages(system_prompt=system_prompt)]


def _content(msg: Any) -> str:
    c = msg.content
    if isinstance(c, str):
        return c
    parts = [p if isinstance(p, str) else str(p.get("text", "")) for p in c]  # multimodal content blocks
    return "".join(parts)


def _base() -> Any:
    try:
        from langchain_core.chat_history import BaseChatMessageHistory
    except ImportError as e:
        raise MissingExtraError("foldstream.langchain needs langchain-core: pip install 'foldstream[langchain]'") from e
    return BaseChatMessageHistory


def _make_class() -> type:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

    classes = {"system": SystemMessage, "human": HumanMessage, "ai": AIMessage}

    class _History(_base()):  # type: ignore[misc]
        """A BaseChatMessageHistory whose messages are foldstream's packed context."""

        def __init__(self, client: Client, session: str, *, budget_tokens: int | None = None,
                     budget_chars: int | None = None, system_prompt: str | None = None,
                     speakers: Mapping[str, str] = DEFAULT_SPEAKERS, wait: bool = True,
                     timeout: float = 30.0) -> None:
            self.client = client
            self.session = session
            self.budget_tokens = budget_tokens
            self.budget_chars = budget_chars
            self.system_prompt = system_prompt
            self.speakers = speakers
            self.wait = wait
            self.timeout = timeout
            self.last_human: str | None = None
            # The live question, when the caller knows it before the
            # history is read (RunnableWithMessageHistory reads the history
            # before it adds the new input); else the latest human message.
            self.query: str | None = None

        async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
            turns = []
            for m in messages:
                content = _content(m)
                turns.append(turn_for_message(self.session, m.type, content, turn_id=getattr(m, "id", None),
                                              name=getattr(m, "name", None), speakers=self.speakers))
                if m.type == "human":
                    self.last_human = content
            await self.client.publish_turns(turns)

        async def aget_messages(self) -> list[BaseMessage]:
            if self.wait:
                await self.client.wait_caught_up(self.session, timeout=self.timeout)
            ctx = await self.client.context(self.session, query=self.query or self.last_human or None,
                                            budget_tokens=self.budget_tokens, budget_chars=self.budget_chars)
            return [classes[t](content=c) for t, c in history_messages(ctx, self.system_prompt)]

        async def aclear(self) -> None:
            await self.client.control(self.session, "reset")
            self.last_human = None

        def _run(self, coro: Any) -> Any:
            loop = self.client.connection._loop
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                coro.close()
                raise RuntimeError("FoldstreamChatMessageHistory: on the client's event loop use the async "
                                   "methods (aget_messages, aadd_messages, aclear)")
            return asyncio.run_coroutine_threadsafe(coro, loop).result(self.timeout)

        @property
        def messages(self) -> list[BaseMessage]:
            out: list[BaseMessage] = self._run(self.aget_messages())
            return out

        def add_messages(self, messages: Sequence[BaseMessage]) -> None:
            self._run(self.aadd_messages(messages))

        def clear(self) -> None:
            self._run(self.aclear())

    _History.__name__ = _History.__qualname__ = "FoldstreamChatMessageHistory"
    return _History


_cls: type | None = None


def __getattr__(name: str) -> Any:
    """``FoldstreamChatMessageHistory`` is built on first access (it subclasses LangChain's class)."""
    global _cls
    if name == "FoldstreamChatMessageHistory":
        if _cls is None:
            _base()
            _cls = _make_class()
        return _cls
    raise AttributeError(name)

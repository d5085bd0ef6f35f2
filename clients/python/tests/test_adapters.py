"""The LangChain and Pipecat adapters.

Their foldstream side (what is published, how the packed context becomes
the history) runs everywhere against the real processor. The tests that
need the frameworks run where langchain-core / pipecat-ai are installed
and are skipped elsewhere (PyPI is not reachable on foldstream's CI).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from conftest import Processor

import foldstream
from foldstream import MissingExtraError
from foldstream.langchain import history_messages, turn_for_message
from foldstream.pipecat import latest_user_text, llm_messages, unpublished_turns


def test_langchain_side_publishes_turns_and_reads_the_packed_context(processor: Processor, session: str) -> None:
    async def run() -> None:
        async with await foldstream.connect(processor.url) as fs:
            turns = [turn_for_message(session, "system", "You are terse."),
                     turn_for_message(session, "human", "I'm flying to Lisbon on May 3rd.", turn_id="h1"),
                     turn_for_message(session, "ai", "Noted.", turn_id="a1"),
                     turn_for_message(session, "human", "Book a hotel.", name="Alice", turn_id="h2")]
            assert [(t.role, t.speaker) for t in turns] == [("system", "System"), ("user", "User"),
                                                            ("assistant", "Assistant"), ("user", "Alice")]
            await fs.publish_turns(turns)
            await fs.wait_caught_up(session)
            ctx = await fs.context(session, query="Book a hotel.")
            assert history_messages(ctx) == [("human", "System: You are terse."),
                                             ("human", "User: I'm flying to Lisbon on May 3rd."),
                                             ("ai", "Noted."), ("human", "Alice: Book a hotel.")]
            assert history_messages(ctx, "Be kind.")[0] == ("system", "Be kind.")

    asyncio.run(run())


def test_pipecat_side_publishes_each_message_once_and_packs_the_context(processor: Processor, session: str) -> None:
    published: set[str] = set()
    conversation: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a voice bot."},
        {"role": "user", "content": "Hi, I'm Alice."},
    ]

    async def run() -> None:
        async with await foldstream.connect(processor.url) as fs:
            first = unpublished_turns(session, conversation, published)
            assert [(t.role, t.text) for t in first] == [("user", "Hi, I'm Alice.")]
            await fs.publish_turns(first)
            conversation.extend([{"role": "assistant", "content": "Hello Alice!"},
                                 {"role": "user", "content": [{"type": "text", "text": "Where do I fly?"}]}])
            second = unpublished_turns(session, conversation, published)
            assert [(t.role, t.speaker, t.text) for t in second] == [
                ("assistant", "Bot", "Hello Alice!"), ("user", "User", "Where do I fly?")]
            ctx_before = await fs.context(session)  # the latest utterance not published yet
            latest = latest_user_text(conversation)
            assert latest == "Where do I fly?"
            msgs = llm_messages(conversation, ctx_before, latest)
            assert msgs[0] == {"role": "system", "content": "You are a voice bot."}
            assert msgs[-1] == {"role": "user", "content": "User: Where do I fly?"}
            await fs.publish_turns(second)
            await fs.wait_caught_up(session)
            ctx = await fs.context(session, query=latest)
            msgs = llm_messages(conversation, ctx, latest)
            assert msgs == [{"role": "system", "content": "You are a voice bot."},
                            {"role": "user", "content": "User: Hi, I'm Alice."},
                            {"role": "assistant", "content": "Hello Alice!"},
                            {"role": "user", "content": "User: Where do I fly?"}]

    asyncio.run(run())


def test_missing_frameworks_name_the_extra() -> None:
    for module, extra, cls in (("langchain_core", "langchain", "FoldstreamChatMessageHistory"),
                               ("pipecat", "pipecat", "FoldstreamContextProcessor")):
        try:
            __import__(module)
            continue
        except ImportError:
            pass
        mod = __import__(f"foldstream.{extra}", fromlist=[cls])
        with pytest.raises(MissingExtraError, match=f"foldstream\\[{extra}\\]"):
            getattr(mod, cls)


def test_langchain_history_with_a_fake_model(processor: Processor, session: str) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables.history import RunnableWithMessageHistory

    from foldstream.langchain import FoldstreamChatMessageHistory

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    fs = asyncio.run_coroutine_threadsafe(foldstream.connect(processor.url), loop).result(10)
    history = FoldstreamChatMessageHistory(fs, session)
    model = FakeListChatModel(responses=["Noted: Lisbon.", "You fly to Lisbon."])
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{input}")])
    chain = RunnableWithMessageHistory(prompt | model, lambda _: history, input_messages_key="input",
                                       history_messages_key="history")
    cfg = {"configurable": {"session_id": session}}
    assert chain.invoke({"input": "I'm flying to Lisbon."}, cfg).content == "Noted: Lisbon."
    chain.invoke({"input": "Where do I fly?"}, cfg)
    msgs = history.messages
    assert isinstance(msgs[-1], AIMessage) and msgs[-1].content == "You fly to Lisbon."
    assert any(isinstance(m, HumanMessage) and "Lisbon" in m.content for m in msgs)
    asyncio.run_coroutine_threadsafe(fs.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)


def test_pipecat_processor_packs_the_llm_context(processor: Processor, session: str) -> None:
    pytest.importorskip("pipecat")
    from pipecat.frames.frames import LLMMessagesFrame  # noqa: F401  (pipecat is importable)
    from pipecat.processors.aggregators.openai_llm_context import OpenAILLMContext, OpenAILLMContextFrame
    from pipecat.processors.frame_processor import FrameDirection

    from foldstream.pipecat import FoldstreamContextProcessor

    async def run() -> None:
        async with await foldstream.connect(processor.url) as fs:
            proc = FoldstreamContextProcessor(fs, session)
            pushed: list[Any] = []

            async def push_frame(frame: Any, direction: Any = FrameDirection.DOWNSTREAM) -> None:
                pushed.append(frame)

            proc.push_frame = push_frame  # type: ignore[method-assign]
            llm_ctx = OpenAILLMContext(messages=[{"role": "system", "content": "You are a voice bot."},
                                                 {"role": "user", "content": "I'm flying to Lisbon."}])
            await proc.process_frame(OpenAILLMContextFrame(context=llm_ctx), FrameDirection.DOWNSTREAM)
            msgs = llm_ctx.get_messages()
            assert msgs[0] == {"role": "system", "content": "You are a voice bot."}
            assert msgs[-1]["content"].endswith("I'm flying to Lisbon.")
            assert len(pushed) == 1

    asyncio.run(run())

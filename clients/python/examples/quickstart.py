"""A bot's turns in, a packed context out.

    python3 examples/quickstart.py            # NATS_URL defaults to nats://127.0.0.1:4222

Start a processor first (``make run`` in the repository: it embeds a
nats-server on port 4222).
"""

import asyncio
import os
import time

import foldstream


async def main() -> None:
    url = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")
    session = f"quickstart-{int(time.time())}"
    async with await foldstream.connect(url) as fs:
        await fs.publish_turns([
            foldstream.Turn(session, "t1", "Alice", "I'm flying to Lisbon on May 3rd for the tournament."),
            foldstream.Turn(session, "t2", "Bot", "Noted: Lisbon, May 3rd. Do you need a hotel?", role="assistant"),
            foldstream.Turn(session, "t3", "Alice", "Yes, near the venue please."),
        ])
        await fs.wait_caught_up(session)  # the processor has applied all three
        ctx = await fs.context(session, query="Where is Alice going?", budget_tokens=1000)
        print(ctx.text(header=True), end="")
        for m in ctx.messages(system_prompt="You are a travel assistant."):
            print(f"{m['role']:>9}: {m['content']}")


if __name__ == "__main__":
    asyncio.run(main())

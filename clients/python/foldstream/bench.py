"""Measure the Python client: publish throughput with acks awaited, context round trips.

Run as ``python3 -m foldstream.bench --url nats://127.0.0.1:4222 --session s1``
(or ``python3 clients/python/bench.py …`` from the repository). It

1. publishes ``--turns`` turns to a session of its own (``--publish-session``,
   default ``bench-py-<time>``) with :meth:`Client.publish_turns`, every
   acknowledgement awaited, at most ``--max-pending`` in flight;
2. asks ``--contexts`` times for the packed context of ``--session`` (with
   ``--query``/``--budget-chars``/``--budget-tokens`` if given), one at a
   time, after ``--warmup`` untimed requests;

and prints one JSON line::

    {"client": "python", "turns": 20000, "publish_s": 2.9, "turns_per_s": 6896.5,
     "contexts": 500, "context_p50_ms": 0.61, "context_p99_ms": 1.4, "context_mean_ms": 0.7}
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from . import Turn, connect


def _percentile(sorted_ms: list[float], p: float) -> float:
    if not sorted_ms:
        return 0.0
    k = min(len(sorted_ms) - 1, max(0, int(round(p / 100 * len(sorted_ms) + 0.5)) - 1))
    return sorted_ms[k]


async def run(args: argparse.Namespace) -> dict[str, object]:
    """Run the measurement and return the result line's fields."""
    out: dict[str, object] = {"client": "python"}
    async with await connect(args.url, inbox_prefix=args.inbox_prefix, user=args.user, password=args.password,
                             max_pending=args.max_pending) as fs:
        if args.turns > 0:
            session = args.publish_session or f"bench-py-{int(time.time() * 1000)}"
            turns = [Turn(session, f"t{i:07d}", "Alice" if i % 2 == 0 else "Bot",
                          f"turn {i}: the ranked match on Tokyo 2099 starts at nine, bring the form",
                          role="user" if i % 2 == 0 else "assistant") for i in range(args.turns)]
            t0 = time.perf_counter()
            await fs.publish_turns(turns)
            dt = time.perf_counter() - t0
            out.update(turns=args.turns, publish_s=round(dt, 3), turns_per_s=round(args.turns / dt, 1),
                       publish_session=session)
        if args.contexts > 0:
            if not args.session:
                raise SystemExit("--session: required with --contexts > 0")
            kw: dict[str, object] = {}
            if args.query:
                kw["query"] = args.query
            if args.budget_chars:
                kw["budget_chars"] = args.budget_chars
            if args.budget_tokens:
                kw["budget_tokens"] = args.budget_tokens
            for _ in range(args.warmup):
                await fs.context(args.session, **kw)  # type: ignore[arg-type]
            ms: list[float] = []
            for _ in range(args.contexts):
                t0 = time.perf_counter()
                await fs.context(args.session, **kw)  # type: ignore[arg-type]
                ms.append((time.perf_counter() - t0) * 1000)
            ms.sort()
            out.update(contexts=args.contexts, context_p50_ms=round(_percentile(ms, 50), 3),
                       context_p99_ms=round(_percentile(ms, 99), 3),
                       context_mean_ms=round(sum(ms) / len(ms), 3), session=args.session)
    return out


def main(argv: list[str] | None = None) -> int:
    """Parse flags, run, print one JSON line."""
    ap = argparse.ArgumentParser(prog="python3 -m foldstream.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="nats://127.0.0.1:4222", help="NATS URL(s), comma-separated")
    ap.add_argument("--session", default="", help="the session whose context is requested")
    ap.add_argument("--turns", type=int, default=20000, help="turns to publish with acks awaited (0: none)")
    ap.add_argument("--publish-session", default="", help="the session the turns go to (default bench-py-<ms>)")
    ap.add_argument("--contexts", type=int, default=500, help="timed context requests (0: none)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed context requests first")
    ap.add_argument("--query", default="", help="ask for a question-aware context")
    ap.add_argument("--budget-chars", type=int, default=0)
    ap.add_argument("--budget-tokens", type=int, default=0)
    ap.add_argument("--max-pending", type=int, default=256, help="publishes in flight at most")
    ap.add_argument("--inbox-prefix", default="_INBOX")
    ap.add_argument("--user", default=None)
    ap.add_argument("--password", default=None)
    args = ap.parse_args(argv)
    res = asyncio.run(run(args))
    sys.stdout.write(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

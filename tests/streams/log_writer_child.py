"""Child process for the log contract: opens a transaction, flushes it, says so, and waits to be
killed. Usage: log_writer_child.py BROKER_URL WRITER_NAME TOPIC_A TOPIC_B"""

from __future__ import annotations

import asyncio
import sys

from streams.log import Message, open_log


async def main(url: str, name: str, a: str, b: str) -> None:
    log = open_log(url)
    await log.start()
    writer = log.writer(name)
    await writer.acquire()
    async with writer.transaction() as tx:
        await tx.append(a, Message(b"doomed-a"))
        await tx.append(b, Message(b"doomed-b"))
        await tx.flush()
        print("flushed", flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))

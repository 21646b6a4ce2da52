"""Forward one TCP address to another: the API server (bound to 127.0.0.1 by kwokctl) made reachable from the
real nodes' pods at the first bridge's address, which the API server advertises as the `kubernetes` Service's
endpoint (issue 23). Bytes pass through unchanged (TLS end to end); nothing else listens.

    python tcpforward.py LISTEN_HOST:PORT TARGET_HOST:PORT
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

#: Connections served at once; more wait in the listen backlog.
MAX_CONNECTIONS = 256


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            writer.close()


async def serve(listen: tuple[str, int], target: tuple[str, int]) -> None:
    slots = asyncio.Semaphore(MAX_CONNECTIONS)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with slots:
            try:
                upstream_reader, upstream_writer = await asyncio.wait_for(asyncio.open_connection(*target), 10)
            except (OSError, TimeoutError):
                writer.close()
                return
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))

    server = await asyncio.start_server(handle, *listen)
    async with server:
        await server.serve_forever()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


if __name__ == "__main__":
    asyncio.run(serve(_address(sys.argv[1]), _address(sys.argv[2])))

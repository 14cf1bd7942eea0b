#!/usr/bin/env python3
"""A TCP proxy that holds every chunk, in both directions, for half a round-trip time before it
passes it on, so that a loopback benchmark sees the latency of a real network (this machine's
kernel has no netem). Bandwidth is not limited beyond what one Python thread relays.

    python3 bench/latency_proxy.py UPSTREAM_PORT RTT_MS

Listens on 127.0.0.1 at a free port, prints the port on stdout, and relays to
127.0.0.1:UPSTREAM_PORT until killed.
"""
import asyncio
import sys


async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    async def send() -> None:
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(send())
    try:
        while True:
            data = await reader.read(1 << 18)
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                break
    except ConnectionError:
        queue.put_nowait((loop.time(), b""))
    await sender


async def handle(client_reader, client_writer, upstream_port: int, delay: float) -> None:
    try:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(
        relay(client_reader, upstream_writer, delay), relay(upstream_reader, client_writer, delay),
        return_exceptions=True)


async def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    upstream_port, rtt_ms = int(sys.argv[1]), float(sys.argv[2])
    delay = rtt_ms / 2000
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, upstream_port, delay), "127.0.0.1", 0, backlog=512)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())

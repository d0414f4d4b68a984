"""A TCP forwarder for tests that cut a client's connections to a gateway mid-stream."""

from __future__ import annotations

import asyncio
import contextlib
import ssl


class DropProxy:
    """A TCP forwarder to a gateway whose open connections can all be cut at once."""

    def __init__(self, port: int, tls: ssl.SSLContext | None = None) -> None:
        self.port = port
        self.tls = tls
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        """Start listening (with TLS if given one); return the proxy's URL."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def drop(self) -> None:
        """Cut every connection open through the proxy."""
        for writer in self.writers:
            writer.close()
        self.writers.clear()

    async def close(self) -> None:
        """Stop listening and cut every connection."""
        self.drop()
        if self.server is not None:
            self.server.close()

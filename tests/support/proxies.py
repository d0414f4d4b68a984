"""A TCP forwarder for tests that cut a client's connections to a gateway mid-stream, or put
TLS with a self-signed certificate in front of it."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from datetime import datetime, timedelta, timezone
from ipaddress import ip_address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec


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


def self_signed_tls(directory: Path) -> ssl.SSLContext:
    """Return a server TLS context with a fresh self-signed certificate for 127.0.0.1."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ip_address("127.0.0.1"))]), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return context

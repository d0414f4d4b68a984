"""The gateway's egress proxy for one kernel: HTTP (CONNECT, and absolute-form requests
forwarded one per connection: `proxy_http.py`) and SOCKS5 (RFC 1928: no authentication,
CONNECT) on one socket, in the gateway's own event loop. A name is first checked by
`network_rules.decide_name()` (under a list, one the list does not name is never resolved), then
resolved here, every address checked by `network_rules.decide()` against the host's own
addresses too (`host_addresses.py`), and the connection made to the first address allowed, the
one checked, never to a name resolved again; refusals are kept for the cell's rule note, and no
answer tells the address a name resolved to. Once answered, a connection is bytes relayed both
ways (`relay.py`), in the connection's task, which close() ends.

A confined kernel's clients reach it through the bridge inside the kernel's network namespace
(`bridge.py`), which hands each TCP connection's socket over the unix socket (`handover.py`):
that socket is the client then, relayed once, by the gateway. A unix connection that hands
over nothing is a client itself, as is each connection to the loopback port (start_tcp). At
most MAX_CONNECTIONS live at once per proxy; one more is closed as it comes.

Longer than 400 lines: a connection's whole life, from its first message through both
protocols' answers to the connect by the address checked, reads best in one place.

Built on h11 for the HTTP heads rather than on a proxy library. pproxy 2.7.9 (2024-01) checks a
destination by its name only (`block(host_name)`), then connects with
`asyncio.open_connection(host)`, which resolves the name again, so a rule on addresses cannot
hold; it starts its relays with `asyncio.ensure_future` and keeps no handle on them, and closes a
refused connection without a word. proxy.py (`proxy-py` 2.4.10) runs acceptor processes or
threads with an event loop of its own, configured by global flags, has SOCKS4 and no SOCKS5,
and connects with a blocking `socket.create_connection`. Neither fits a proxy per kernel inside
the gateway's loop, and what they would give (parse a head, relay bytes) is the small part.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import os
import socket
import stat
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from loomgate.gateway.sandbox.network.handover import first_message, handed_socket
from loomgate.gateway.sandbox.network.host_addresses import host_addresses
from loomgate.gateway.sandbox.network.network_rules import (
    NetworkPolicy,
    NetworkRefusal,
    decide,
    decide_name,
)
from loomgate.gateway.sandbox.network.proxy_http import (
    HEAD_LIMIT,
    BadRequest,
    ResponseHeads,
    answer,
    parse_request,
)
from loomgate.gateway.sandbox.network.relay import close_socket, received, relay, sent

__all__ = ["KernelProxy", "Resolver"]

# A name and port to (family, sockaddr) pairs, in the order to try them.
Resolver = Callable[[str, int], Awaitable[list[tuple[int, tuple[Any, ...]]]]]

REQUEST_TIMEOUT = 30.0  # for a client to say where it goes
CONNECT_TIMEOUT = 10.0  # for each address tried
ANSWER_TIMEOUT = 60.0  # for all a connection's words before its relay (resolving too)
MAX_CONNECTIONS = 512  # live per proxy (a kernel's); one more is closed at once
RECENT = 100  # refusals kept for refusals_since()
UNIX_PATH_MAX = 107
SOCKS_ERRNO = {  # RFC 1928 replies for a connect that failed
    errno.ENETUNREACH: 0x03,
    errno.EHOSTUNREACH: 0x04,
    errno.ECONNREFUSED: 0x05,
    errno.ETIMEDOUT: 0x06,
}
SOCKS_REFUSED = 0x02  # connection not allowed by ruleset
SOCKS_UNRESOLVED = 0x04  # host unreachable


class Unanswerable(Exception):
    """The client closed, or spoke neither protocol: close it without an answer."""


class Failure(Exception):
    """A destination not reached: the HTTP status, the SOCKS5 reply and the sentence."""

    def __init__(self, status: int, socks: int, sentence: str) -> None:
        super().__init__(sentence)
        self.status, self.socks, self.sentence = status, socks, sentence


class KernelProxy:
    """One kernel's proxy: its listeners, its live connections and its recent refusals."""

    def __init__(
        self, policy: NetworkPolicy, profile: str, *, resolver: Resolver | None = None
    ) -> None:
        if not policy.proxied:
            raise ValueError(f"a profile with {policy.describe()} has no proxy")
        self.policy = policy
        self.profile = profile
        self._resolve = resolver or getaddrinfo
        self._listeners: list[socket.socket] = []
        self._acceptors: list[asyncio.Task[None]] = []
        self._unix: tuple[Path, int] | None = None  # the path and its inode: remove only ours
        self._tasks: set[asyncio.Task[None]] = set()  # one per connection
        self._refusals: deque[tuple[float, NetworkRefusal]] = deque(maxlen=RECENT)

    async def start_unix(self, path: Path) -> None:
        """Listen on a unix socket at `path` (mode 0600), replacing a stale socket there. A
        connection whose first message hands over a TCP socket (`handover.py`) has that socket
        served as the client; one that hands over no fd is the client itself."""
        listener, inode = unix_listener(path)
        self._unix = (path, inode)
        self._listen(listener)

    async def start_tcp(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listen on a loopback address, on `port` (0: any free one; a kernel taken back keeps
        the one its variables name), return the port."""
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"the kernel's proxy listens on loopback only, not on {host}")
        listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host, port))
        except BaseException:
            listener.close()
            raise
        self._listen(listener)
        bound: int = listener.getsockname()[1]
        return bound

    def _listen(self, listener: socket.socket) -> None:
        listener.listen(512)
        listener.setblocking(False)
        self._listeners.append(listener)
        self._acceptors.append(asyncio.ensure_future(self._accept(listener)))

    async def close(self) -> None:
        """Stop listening, end every connection, remove the unix socket if it is still ours."""
        for acceptor in self._acceptors:  # before its socket closes: it waits on that fd
            acceptor.cancel()
        await asyncio.gather(*self._acceptors, return_exceptions=True)
        self._acceptors.clear()
        for listener in self._listeners:
            listener.close()
        self._listeners.clear()
        if self._unix is not None:
            remove_socket(*self._unix)
            self._unix = None
        while self._tasks:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def connections(self) -> int:
        """Return how many connections are served now (at most MAX_CONNECTIONS)."""
        return len(self._tasks)

    def refusals_since(self, t: float) -> list[NetworkRefusal]:
        """Return the refusals made at or after `t` (a time.time() value), oldest first."""
        return [refusal for at, refusal in self._refusals if at >= t]

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, _ = await loop.sock_accept(listener)
            except OSError:
                await asyncio.sleep(0.1)  # out of file descriptors: wait for some to close
                continue
            if len(self._tasks) >= MAX_CONNECTIONS:
                close_socket(client, reset=True)
                continue
            client.setblocking(False)
            if client.family == socket.AF_UNIX:
                task = asyncio.ensure_future(self._arrived(client))
            else:
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                task = asyncio.ensure_future(self._serve(client))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _arrived(self, conn: socket.socket) -> None:
        """Serve a unix connection: the TCP socket its first message hands over (the
        connection closed then), else the connection itself."""
        try:
            message = await first_message(conn, REQUEST_TIMEOUT)
        except (OSError, TimeoutError, asyncio.TimeoutError):
            conn.close()
            return
        except BaseException:
            conn.close()
            raise
        if not message.fds and not message.truncated:
            return await self._serve(conn, message.data)
        conn.close()
        try:
            client = handed_socket(message)
        except ValueError:
            return  # its fds closed: the sandbox sent what no bridge sends
        with contextlib.suppress(OSError):
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await self._serve(client, handed=True)

    async def _serve(
        self, client: socket.socket, early: bytes = b"", *, handed: bool = False
    ) -> None:
        """Hear where `client` goes (`early`: what it already sent), answer, and relay until
        both ends are done; `handed`: a socket from a sandbox, never spliced."""
        incoming = Incoming(client, early)
        upstream: socket.socket | None = None
        try:
            first = await asyncio.wait_for(incoming.peek(), REQUEST_TIMEOUT)
            answer = self._socks(incoming) if first == 0x05 else self._http(incoming)
            upstream, head = await asyncio.wait_for(answer, ANSWER_TIMEOUT)
        except (Unanswerable, OSError, TimeoutError, asyncio.TimeoutError):
            close_socket(client)
            return
        except BaseException:
            close_socket(client)
            raise
        if upstream is None:
            close_socket(client)
            return
        with contextlib.suppress(OSError):
            await relay(client, upstream, bytes(incoming.buffer), head, splice=not handed)

    async def _socks(self, incoming: Incoming) -> tuple[socket.socket | None, None]:
        """Answer a SOCKS5 client; return the upstream once told it is connected."""
        _, count = await incoming.exactly(2)
        if 0x00 not in await incoming.exactly(count):
            await incoming.send(b"\x05\xff")  # no acceptable method
            return None, None
        await incoming.send(b"\x05\x00")
        version, command, _, kind = await incoming.exactly(4)
        if version != 0x05:
            raise Unanswerable
        if kind == 0x01:
            host = str(ipaddress.IPv4Address(await incoming.exactly(4)))
        elif kind == 0x04:
            host = str(ipaddress.IPv6Address(await incoming.exactly(16)))
        elif kind == 0x03:
            length = (await incoming.exactly(1))[0]
            host = (await incoming.exactly(length)).decode("ascii", "replace")
        else:
            await incoming.send(socks_reply(0x08))  # address type not supported
            return None, None
        (port,) = struct.unpack("!H", await incoming.exactly(2))
        if command != 0x01:
            await incoming.send(socks_reply(0x07))  # command not supported
            return None, None
        try:
            upstream = await self._open(host, port)
        except Failure as failure:
            await incoming.send(socks_reply(failure.socks))
            return None, None
        return await answered(incoming, upstream, socks_reply(0x00, upstream.getsockname())), None

    async def _http(self, incoming: Incoming) -> tuple[socket.socket | None, ResponseHeads | None]:
        """Answer an HTTP proxy client: a CONNECT tunnel, or one request forwarded."""
        try:
            request = parse_request(await asyncio.wait_for(incoming.head(), REQUEST_TIMEOUT))
            upstream = await self._open(request.host, request.port)
        except (BadRequest, Failure) as refused:
            status = refused.status
            await incoming.answer(answer(status, str(refused)))
            return None, None
        if request.tunnel:
            ok = b"HTTP/1.1 200 Connection established\r\n\r\n"
            return await answered(incoming, upstream, ok), None
        try:
            await sent(upstream, request.head)
        except BaseException:
            upstream.close()
            raise
        return upstream, ResponseHeads()

    async def _open(self, host: str, port: int) -> socket.socket:
        """Return a socket connected to the first address of `host` that decide() allows
        (Failure: none is, or none answers)."""
        if not 1 <= port <= 65535:
            raise Failure(400, 0x01, f"{port} is not a port number")
        literal = address_in(host)
        name = None if literal else host
        if literal is not None:
            family = int(socket.AF_INET6 if literal.version == 6 else socket.AF_INET)
            candidates: list[tuple[int, tuple[Any, ...]]] = [(family, (str(literal), port))]
        else:
            early = decide_name(self.policy, profile=self.profile, host=host, port=port)
            if early is not None:
                self._refusals.append((time.time(), early))
                raise Failure(403, SOCKS_REFUSED, early.reason)
            try:
                candidates = await self._resolve(host, port)
            except (OSError, UnicodeError) as error:
                why = getattr(error, "strerror", None) or str(error)
                raise Failure(
                    502, SOCKS_UNRESOLVED, f"{host} could not be resolved: {why}"
                ) from None
        try:
            own = host_addresses()
        except OSError as error:
            said = f"this host's own addresses could not be read: {error.strerror or error}"
            raise Failure(502, 0x01, said) from None
        refusal, allowed = None, []
        for family, sockaddr in dict.fromkeys(candidates):
            address = ipaddress.ip_address(sockaddr[0])
            verdict = decide(
                self.policy, profile=self.profile, host=name, address=address, port=port, own=own
            )
            if verdict is None:
                allowed.append((family, sockaddr))
            elif refusal is None:
                refusal = verdict
        if refusal is not None and not allowed:
            self._refusals.append((time.time(), refusal))
            raise Failure(403, SOCKS_REFUSED, refusal.reason)
        failed = errno.EHOSTUNREACH  # what an empty answer from the resolver means
        for family, sockaddr in allowed:
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                await asyncio.wait_for(
                    asyncio.get_running_loop().sock_connect(sock, sockaddr), CONNECT_TIMEOUT
                )
                return sock
            except (TimeoutError, asyncio.TimeoutError):
                failed = errno.ETIMEDOUT
            except OSError as error:
                failed = error.errno or errno.EIO
            except BaseException:
                sock.close()
                raise
            sock.close()
        why = f"could not connect to {host}:{port}: {os.strerror(failed)}"
        raise Failure(502, SOCKS_ERRNO.get(failed, 0x01), why)


class Incoming:
    """A client socket before its relay, and what it has sent that is not yet read."""

    def __init__(self, sock: socket.socket, early: bytes = b"") -> None:
        self.sock = sock
        self.buffer = bytearray(early)

    async def more(self) -> None:
        data = await received(self.sock, 65536)
        if not data:
            raise Unanswerable
        self.buffer += data

    async def peek(self) -> int:
        """Return the first byte, keeping it."""
        if not self.buffer:
            await self.more()
        return self.buffer[0]

    async def exactly(self, count: int) -> bytes:
        while len(self.buffer) < count:
            await self.more()
        taken = bytes(self.buffer[:count])
        del self.buffer[:count]
        return taken

    async def head(self) -> bytes:
        """Return an HTTP head and its blank line, leaving what follows it."""
        while (end := self.buffer.find(b"\r\n\r\n")) < 0 and len(self.buffer) <= HEAD_LIMIT:
            await self.more()
        if end < 0 or end > HEAD_LIMIT:
            raise BadRequest(431, f"the request head is larger than {HEAD_LIMIT} bytes")
        return await self.exactly(end + 4)

    async def send(self, data: bytes) -> None:
        await sent(self.sock, data)

    async def answer(self, response: bytes) -> None:
        """Send the proxy's own response and end the connection, reading what the client still
        sends (a body) for a moment, so that closing does not reset the connection before the
        client has read the answer."""
        await self.send(response)
        self.sock.shutdown(socket.SHUT_WR)
        with contextlib.suppress(Unanswerable, OSError, TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(self._drain(), 2.0)

    async def _drain(self) -> None:
        while True:
            self.buffer.clear()
            await self.more()


async def answered(incoming: Incoming, upstream: socket.socket, reply: bytes) -> socket.socket:
    """Send the client `reply` (connected), return `upstream` (closed if that fails)."""
    try:
        await incoming.send(reply)
    except BaseException:
        upstream.close()
        raise
    return upstream


def unix_listener(path: Path) -> tuple[socket.socket, int]:
    """Return a socket bound at `path` with mode 0600 (a stale socket there is replaced), and
    the inode it made."""
    if len(os.fsencode(path)) > UNIX_PATH_MAX:
        raise ValueError(f"the proxy's socket path {path} is longer than {UNIX_PATH_MAX} bytes")
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise FileExistsError(f"{path} exists and is not a socket: the proxy cannot listen")
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        os.fchmod(listener.fileno(), 0o600)  # the mode bind() gives the file, on Linux
        listener.bind(str(path))
        path.chmod(0o600)
        return listener, path.lstat().st_ino
    except BaseException:
        listener.close()
        raise


def remove_socket(path: Path, inode: int) -> None:
    """Remove the socket at `path` if it is still the one made (a later proxy's stays)."""
    with contextlib.suppress(FileNotFoundError):
        if path.lstat().st_ino == inode:
            path.unlink()


def socks_reply(code: int, bound: tuple[Any, ...] = ("0.0.0.0", 0)) -> bytes:
    """Return a SOCKS5 reply: `code`, and the address the proxy connected from."""
    address = ipaddress.ip_address(bound[0])
    kind = 0x01 if address.version == 4 else 0x04
    return bytes([0x05, code, 0x00, kind]) + address.packed + struct.pack("!H", bound[1])


def address_in(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """Return the address `host` writes ("10.0.0.5", "[::1]"), or None for a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def getaddrinfo(host: str, port: int) -> list[tuple[int, tuple[Any, ...]]]:
    """Resolve `host` with the event loop's resolver: (family, sockaddr) for TCP."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    return [(family, sockaddr) for family, _, _, _, sockaddr in infos]

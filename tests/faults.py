"""Real network faults between the store and PostgreSQL: a loopback TCP proxy.

:class:`PgProxy` listens on a free loopback port and forwards every connection to the real
server, reading the PostgreSQL wire protocol as it goes so that a test can make two faults
happen at a chosen moment:

* :meth:`PgProxy.drop_commit_reply`: the next COMMIT (simple or extended protocol) reaches the
  server and is carried out there, but its reply never reaches the client: the proxy waits for
  the server's ``CommandComplete``, swallows it and cuts the connection. This is the classic
  ambiguous commit: the client cannot tell whether its transaction committed.
* :meth:`PgProxy.outage`: every open connection is cut and new ones are cut as soon as they
  arrive, until :meth:`PgProxy.restore`; to the client this is a server that went away.

Nothing is mocked: the client is the real driver and the server the real PostgreSQL. The
proxy answers ``N`` (no TLS) to an SSL/GSS request itself, so the stream stays readable.
"""

from __future__ import annotations

import socket
import struct
import threading
from contextlib import suppress
from dataclasses import dataclass, field

from sqlalchemy.engine import make_url

_SSL_REQUEST = 80877103
_GSS_REQUEST = 80877104
_CANCEL_REQUEST = 80877102


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _read_message(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """One typed protocol message: (type byte, whole raw message), or None at end of stream."""
    head = _recv_exact(sock, 5)
    if head is None:
        return None
    (length,) = struct.unpack("!I", head[1:])
    body = _recv_exact(sock, length - 4)
    if body is None:
        return None
    return head[:1], head + body


def _is_commit(kind: bytes, raw: bytes) -> bool:
    """Whether a client message runs COMMIT (simple ``Q`` or extended-protocol ``P``arse)."""
    if kind not in (b"Q", b"P"):
        return False
    return _command(_statement(kind, raw)[1]) in (b"COMMIT", b"END", b"COMMIT WORK")


def _statement(kind: bytes, raw: bytes) -> tuple[bytes, bytes]:
    """The prepared statement's name (empty for ``Q``) and text of a ``Q`` or ``P`` message."""
    if kind == b"Q":
        return b"", raw[5:].split(b"\0", 1)[0]
    name, _, rest = raw[5:].partition(b"\0")
    return name, rest.split(b"\0", 1)[0]


def _command(text: bytes) -> bytes:
    return text.strip().rstrip(b";").strip().upper()


_TOKEN = b"INSERT INTO TT_COMMIT_TOKENS"
"""What every write transaction of the store runs (its commit token): a pipeline that runs it
outside a ``BEGIN`` block is a whole transaction, committed at its ``Sync``."""


@dataclass(eq=False)
class _Link:
    client: socket.socket
    server: socket.socket
    drop_reply: threading.Event = field(default_factory=threading.Event)
    outage_after_reply: threading.Event = field(default_factory=threading.Event)
    """The armed COMMIT went up this link: go down once its reply is through."""
    outage_at_ready: bool = False
    """That COMMIT's CommandComplete came down: go down at the ReadyForQuery that follows."""
    statements: dict[bytes, bytes] = field(default_factory=dict)
    """The text of each statement the client prepared, by name."""
    in_block: bool = False
    """The client sent BEGIN and has not ended that transaction yet."""
    tokened: bool = False
    """Since the last Sync, a statement wrote a commit token outside a BEGIN block."""
    syncs: int = 1
    """ReadyForQuery messages the client will have asked for (the startup's, then one per
    ``Sync`` or ``Q``)."""
    readies: int = 0
    """ReadyForQuery messages the server sent."""
    commit_ready: int = 0
    """The ReadyForQuery that answers the armed implicit commit (its ``Sync``): its reply."""

    def note(self, kind: bytes, raw: bytes) -> bool:
        """Follow a client message; whether it commits a transaction: a COMMIT, or the
        ``Sync`` that ends a pipeline which wrote a commit token without a BEGIN (the server
        runs such a pipeline as one implicit transaction, committed there)."""
        if kind in (b"Q", b"P", b"B"):
            if kind == b"B":
                _portal, _, rest = raw[5:].partition(b"\0")
                text = self.statements.get(rest.split(b"\0", 1)[0], b"")
            else:
                name, text = _statement(kind, raw)
                if kind == b"P":
                    self.statements[name] = text
            command = _command(text)
            if command.startswith((b"BEGIN", b"START TRANSACTION")):
                self.in_block = True
            elif command.startswith((b"COMMIT", b"END", b"ROLLBACK", b"ABORT")):
                self.in_block = False
            elif _TOKEN in command and not self.in_block:
                self.tokened = True
        if kind in (b"S", b"Q"):
            self.syncs += 1
        if kind == b"S" and self.tokened:
            self.tokened = False
            self.commit_ready = self.syncs
            return True
        return _is_commit(kind, raw)

    def cut(self, *, server_only: bool = False) -> None:
        for sock in (self.server,) if server_only else (self.client, self.server):
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with suppress(OSError):
                sock.close()


class PgProxy:
    """A loopback proxy in front of a PostgreSQL server that can lose a COMMIT's reply."""

    def __init__(self, target_url: str) -> None:
        url = make_url(target_url)
        self._target = (url.host or "127.0.0.1", url.port or 5432)
        self._url = url
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._armed = 0
        self._skip = 0
        self._down = False
        self._outage_on_drop = False
        self._outage_armed = 0
        self._outage_skip = 0
        self.outage_begun = threading.Event()
        self.commits_seen = 0
        self.dropped = threading.Event()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="pg-proxy").start()

    def url(self, url: str | None = None) -> str:
        """``url`` (default: the target's) with its host and port pointed at this proxy."""
        base = make_url(url) if url else self._url
        return base.set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)

    # -- faults ----------------------------------------------------------------------------

    def drop_commit_reply(self, *, skip: int = 0, outage: bool = False) -> threading.Event:
        """Lose the reply to one COMMIT: the one after ``skip`` further COMMITs pass untouched.

        With ``outage``, an :meth:`outage` starts at that moment too (before the client can
        notice anything), so the client cannot reach the server to ask what happened.
        Returns an event that is set once the reply has been swallowed and the connection cut.
        """
        with self._lock:
            self._armed, self._skip = 1, skip
            self._outage_on_drop = outage
            self.dropped.clear()
        return self.dropped

    def outage_after_commit(self, *, skip: int = 0) -> threading.Event:
        """Start an :meth:`outage` just after one COMMIT's reply reached the client (the one
        after ``skip`` further COMMITs): that write succeeded, the next ones find no server.

        The outage begins before the client can read the reply (which still reaches it), so
        nothing the client sends after it, on any connection, reaches the server: however
        late this proxy's threads run, a later COMMIT is never carried out with its reply cut
        off. A COMMIT the server refuses with an error does not end the wait.

        Returns an event that is set once the outage has begun.
        """
        with self._lock:
            self._outage_armed, self._outage_skip = 1, skip
            self.outage_begun.clear()
        return self.outage_begun

    def disarm(self) -> None:
        """Stop waiting for a COMMIT to lose or to follow with an outage (one that is already
        being lost still is)."""
        with self._lock:
            self._armed = 0
            self._outage_armed = 0

    def outage(self) -> None:
        """Cut every connection, and every new one, until :meth:`restore`."""
        self._go_down()

    def _go_down(self, *, replying: _Link | None = None) -> None:
        """:meth:`outage`, except that ``replying`` keeps its client side, to pass on one
        last reply (its server side is cut too: nothing more reaches the server)."""
        with self._lock:
            self._down = True
            links = list(self._links)
        for link in links:
            link.cut(server_only=link is replying)

    def restore(self) -> None:
        """End an :meth:`outage`: new connections are forwarded again."""
        with self._lock:
            self._down = False

    def close(self) -> None:
        """Stop listening and cut every connection."""
        self._closed = True
        with suppress(OSError):
            self._listener.close()
        self.outage()

    # -- forwarding -------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                down = self._down
            if down:
                with suppress(OSError):
                    client.close()
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self._target, timeout=10)
            server.settimeout(None)
        except OSError:
            client.close()
            return
        for sock in (client, server):  # forward each message at once (no Nagle delay)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link = _Link(client, server)
        with self._lock:
            self._links.add(link)
        try:
            if self._startup(link):
                threading.Thread(target=self._downstream, args=(link,), daemon=True).start()
                self._upstream(link)
        finally:
            link.cut()
            with self._lock:
                self._links.discard(link)

    def _startup(self, link: _Link) -> bool:
        """Forward the untyped startup message, refusing TLS so the stream stays readable."""
        while True:
            head = _recv_exact(link.client, 8)
            if head is None:
                return False
            length, code = struct.unpack("!II", head)
            rest = _recv_exact(link.client, length - 8) if length > 8 else b""
            if rest is None:
                return False
            if code in (_SSL_REQUEST, _GSS_REQUEST):
                link.client.sendall(b"N")
                continue
            link.server.sendall(head + rest)
            return code != _CANCEL_REQUEST

    def _upstream(self, link: _Link) -> None:
        while True:
            message = _read_message(link.client)
            if message is None:
                return
            kind, raw = message
            if link.note(kind, raw):
                with self._lock:
                    self.commits_seen += 1
                    if self._armed:
                        if self._skip:
                            self._skip -= 1
                        else:
                            self._armed = 0
                            link.drop_reply.set()
                    if self._outage_armed:
                        if self._outage_skip:
                            self._outage_skip -= 1
                        else:
                            self._outage_armed = 0
                            link.outage_after_reply.set()
            try:
                link.server.sendall(raw)
            except OSError:
                return

    def _downstream(self, link: _Link) -> None:
        while True:
            message = _read_message(link.server)
            if message is None:
                link.cut()
                return
            kind, raw = message
            ends = kind == b"C" and raw[5:].split(b"\0", 1)[0] in (b"COMMIT", b"ROLLBACK")
            if kind == b"Z":
                link.readies += 1
                ends = ends or link.readies == link.commit_ready  # an implicit commit's reply
            if link.drop_reply.is_set():
                # Swallow everything until the COMMIT's CommandComplete, then cut: the server
                # has committed, the client never hears of it.
                if ends:
                    if self._outage_on_drop:
                        self.outage()
                    link.cut()
                    self.dropped.set()
                    return
                if kind != b"E":  # an error: the COMMIT did not run, pass it on untouched
                    continue
                link.drop_reply.clear()
            if ends and link.outage_after_reply.is_set():
                # The armed COMMIT's own reply: keyed on it, not on the first ReadyForQuery
                # after the COMMIT went up, which may answer a statement sent before it (the
                # COMMIT would then be cut off in flight: a lost reply, not an outage after it).
                link.outage_at_ready = True
            if kind == b"Z" and link.outage_at_ready:
                # The server goes away before the client can read that the COMMIT is through:
                # nothing it sends once it knows, on this connection or another, reaches the
                # server. The reply itself still does reach the client.
                self._go_down(replying=link)
                with suppress(OSError):
                    link.client.sendall(raw)
                    # The end of the stream after the reply (the upstream side closes the
                    # socket when the client writes or closes): a reset could overtake it.
                    link.client.shutdown(socket.SHUT_WR)
                self.outage_begun.set()
                return
            try:
                link.client.sendall(raw)
            except OSError:
                link.cut()
                return

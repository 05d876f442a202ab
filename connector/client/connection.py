"""Blocking remoting connections: many requests in flight on one socket.

A ``RemotingConnection`` writes requests from any thread (under a lock);
answers are cut out of the stream and handed to their callers by
``opaque``, in any order. Who reads: while one thread at a time calls and
waits, that caller reads the socket itself (no thread wake-up between the
socket and a lone caller); from the first time two callers wait at once,
the first asynchronous request (a callback instead of a waiting caller),
or when the client takes requests from the server
(NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE: ``on_request``), a
reader thread of the connection reads for good. Callbacks (and the server's
requests) run on that thread; one that holds it over ``STALL_S`` (a push
consumer's listener, a slow ``send_async`` callback) has the reading taken
over by a new reader thread, so the other answers of the connection do not
wait for it.

``RemotingClient`` keeps one connection per address, shared by every thread
of a client (RocketMQ's NettyRemotingClient channel table), and replaces a
connection that broke. A connection nobody has read for a while (no reader
thread, nothing in flight) may have been closed by its server meanwhile (a
broker restarted on the same port, or one that dropped a silent client):
before such a connection is handed out again, a non-blocking peek at its
socket tells whether the server's FIN or RST is waiting, and a closed one is
replaced by a new connection before the request is written, instead of the
request failing (Netty learns it from the channel's close event; here nobody
reads an idle socket).

Errors: ``ConnectError`` when no connection can be made (safe to retry
anywhere), ``RemotingTimeoutError`` when the answer does not come in time,
``RemotingError`` when the connection breaks with the request in flight (it
may or may not have been processed).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable

from connector.errors import ConfigError, ConnectError, RemotingError, RemotingTimeoutError
from connector.protocol.acl import Credentials, SignSequence, remoting_signer
from connector.protocol.remoting import (
    FLAG_ONEWAY,
    FrameDecoder,
    FrameError,
    HttpPeerError,
    RemotingCommand,
    encode_header,
    frame_prefix,
)

__all__ = [
    "DEFAULT_BUSY_POLL_US",
    "STALL_S",
    "RemotingClient",
    "RemotingConnection",
    "split_addr",
]

log = logging.getLogger(__name__)

_RECV = 256 * 1024
_RECV_LARGE = 4 * 1024 * 1024
_READ_SLICE_S = 0.05  # a reader checks its deadline (and whether to hand over) this often
# a callback (or a server request's handler) that holds a connection's reader thread this
# long gets the reading taken from it: a new reader thread reads the other answers
STALL_S = 0.05
_SMALL_BODY = 16 * 1024  # below this a frame is joined into one bytes before sending
# a connection unused this long is checked (a peek, one syscall) before it is used again
STALE_CHECK_IDLE_S = 1.0
# a lone caller polls its socket this long for the answer before sleeping in recv (the
# answer of a small request usually comes sooner, and a sleeping thread's wake-up costs
# about as much on a VM); Producer and PullConsumer take it as busy_poll_us
DEFAULT_BUSY_POLL_US = 100
# where a platform has no MSG_DONTWAIT (Windows), the peek waits at most a read slice
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_yield = getattr(os, "sched_yield", lambda: None)

RequestHandler = Callable[["RemotingConnection", RemotingCommand], None]
Callback = Callable[[RemotingCommand | None, BaseException | None], None]


def _timeval(seconds: float) -> bytes:
    whole = int(seconds)
    return struct.pack("ll", whole, int((seconds - whole) * 1_000_000))


def split_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConnectError(f"address {addr!r} is not host:port")
    return host.strip("[]"), int(port)


class _Call:
    """One request waiting for its answer: a lock released when it comes (the cheapest
    wake-up between two threads), or a callback run by whoever reads the answer."""

    __slots__ = ("callback", "error", "finished", "lock", "response")

    def __init__(self, callback: Callback | None = None) -> None:
        self.response: RemotingCommand | None = None
        self.error: BaseException | None = None
        self.finished = False
        self.callback = callback
        self.lock: threading.Lock | None = None
        if callback is None:
            self.lock = threading.Lock()
            self.lock.acquire()

    def done(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        self.response, self.error = response, error
        self.finished = True
        if self.callback is not None:
            try:
                self.callback(response, error)
            except Exception:  # the caller's callback: log, keep reading
                log.exception("remoting callback failed")
        else:
            self.wake()

    def wake(self) -> None:
        """Wake the waiting thread (its answer came, or it is to read for everyone)."""
        assert self.lock is not None
        with contextlib.suppress(RuntimeError):  # already woken, not yet waiting again
            self.lock.release()


class Timeouts:
    """Fails async requests that were not answered in time, and takes the reading from
    a reader thread held up by a callback (``RemotingConnection.take_over_if_stalled``):
    one thread a client, started with the first such request or reader thread, waking
    every ``TICK_S`` (RocketMQ scans its response table every second; this is finer,
    and as cheap while nothing is due)."""

    TICK_S = 0.01

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, RemotingConnection, int, float]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._readers: set[RemotingConnection] = set()  # connections with a reader thread

    def watch(self, conn: RemotingConnection, opaque: int, code: int, timeout_s: float) -> None:
        entry = (time.monotonic() + timeout_s, next(self._seq), opaque, conn, code, timeout_s)
        with self._lock:
            heapq.heappush(self._heap, entry)
            self._start()

    def guard(self, conn: RemotingConnection, on: bool) -> None:
        """Look after ``conn``'s reader thread (``on``) or no longer."""
        with self._lock:
            if on:
                self._readers.add(conn)
                self._start()
            else:
                self._readers.discard(conn)

    def _start(self) -> None:  # under _lock
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="pymq-remoting-timeouts", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.TICK_S):
            now = time.monotonic()
            due = []
            with self._lock:
                while self._heap and self._heap[0][0] <= now:
                    due.append(heapq.heappop(self._heap))
                readers = list(self._readers) if self._readers else ()
            for _, _, opaque, conn, code, timeout_s in due:
                conn.expire(opaque, code, timeout_s)
            for conn in readers:
                conn.take_over_if_stalled(now)

    def close(self) -> None:
        self._stop.set()


def _tls_handshake(
    sock: socket.socket, ctx: ssl.SSLContext, host: str, addr: str, timeout_s: float
) -> socket.socket:
    """``sock`` wrapped in TLS, the server's certificate checked (ConnectError naming why,
    in one line: a wrong CA, a name the certificate does not carry, a plaintext server)."""
    sock.settimeout(timeout_s)
    try:
        return ctx.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        sock.close()
        why = exc.verify_message or exc.reason or str(exc)
        raise ConnectError(
            f"TLS to {addr}: the server's certificate is not trusted ({why})"
        ) from None
    except (ssl.SSLError, OSError) as exc:
        sock.close()
        why = str(getattr(exc, "reason", None) or exc.strerror or exc).replace("_", " ").lower()
        raise ConnectError(f"TLS to {addr} failed ({why}): is it a TLS port?") from None


class RemotingConnection:
    """One connection to a server; thread-safe."""

    def __init__(
        self,
        addr: str,
        *,
        connect_timeout_s: float = 3.0,
        on_request: RequestHandler | None = None,
        on_close: Callable[[RemotingConnection], None] | None = None,
        timeouts: Timeouts | None = None,
        busy_poll_s: float = 0.0,
        credentials: Credentials | None = None,
        sequence: SignSequence | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.addr = addr
        self.tls = tls is not None
        # requests are signed (RocketMQ's ACL) when the client has an account
        self.credentials = credentials
        self.sequence = sequence or (SignSequence() if credentials is not None else None)
        # sign(ext, body): one compiled call a request (connector/protocol/acl.py)
        self._sign = None if credentials is None else remoting_signer(credentials, self.sequence)
        self.timeouts = timeouts
        self.busy_poll_s = busy_poll_s
        host, port = split_addr(addr)
        try:
            sock = socket.create_connection((host, port), connect_timeout_s)
        except TimeoutError:
            raise ConnectError(f"connecting to {addr} timed out") from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {addr}: {exc.strerror or exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            sock = _tls_handshake(sock, tls, host, addr, connect_timeout_s)
        # blocking, with a kernel receive timeout: whoever reads wakes every slice to
        # check its deadline (Python's own timeouts cost a poll() before every recv)
        sock.settimeout(None)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(_READ_SLICE_S))
        self._sock = sock
        self._send_lock = threading.Lock()
        self._calls: dict[int, _Call] = {}
        self._opaque = itertools.count(1)
        self._on_request = on_request
        self._on_close = on_close
        self.closed = False
        self.last_sent = time.monotonic()  # when a request last went out
        self._decoder = FrameDecoder()
        self._read_lock = threading.Lock()  # held by whoever reads the socket now
        self._reader: threading.Thread | None = None
        self._reader_lock = threading.Lock()
        # when the reader thread called the callback it is in now (0.0: none)
        self._callback_since = 0.0
        if on_request is not None:  # the server may call at any time: always read
            self.start_reader()

    def listen(self, on_request: RequestHandler) -> None:
        """From now on the server's requests go to ``on_request`` (and a reader thread
        reads for good, as the server may call at any time)."""
        self._on_request = on_request
        self.start_reader()

    def start_reader(self) -> None:
        """From now on a thread of its own reads every answer (needed once answers go
        to callbacks, or the server may send requests); until then a caller waiting
        for its answer reads the socket itself, which saves two thread wake-ups.

        The thread ends after a read slice with nothing to read while no request is
        in flight (and the server cannot call): a sync caller then reads its own
        answer again, so a burst of ``send_async`` does not cost every later sync call
        a thread hop. Taken under ``_reader_lock`` like the thread's decision to end, so
        an async request registered before this call is always read."""
        with self._reader_lock:
            if self._reader is None:
                self._new_reader()

    def _new_reader(self) -> None:  # under _reader_lock
        self._reader = threading.Thread(
            target=self._read_loop, name=f"pymq-remoting-{self.addr}", daemon=True
        )
        self._reader.start()
        if self.timeouts is not None:
            self.timeouts.guard(self, True)

    def take_over_if_stalled(self, now: float) -> None:
        """The timer's look at the reader thread: if a callback (a ``send_async``
        callback, a push consumer's listener run on it, a server request's handler) has
        held it for over ``STALL_S``, a new reader thread reads from now on; the old one
        ends once its callback returns, without reading again. Answers of other requests
        (sends, heartbeats) are not held up behind a slow callback for longer."""
        since = self._callback_since
        if not since or now - since < STALL_S or self.closed:
            return
        with self._reader_lock:
            if self._callback_since != since or self._reader is None or self.closed:
                return
            self._callback_since = 0.0
            log.debug(
                "a callback has held the reader of %s for %.0f ms: a new thread reads",
                self.addr, (now - since) * 1000,
            )  # fmt: skip
            self._new_reader()

    # -- requests ----------------------------------------------------------------------

    def _send(self, cmd: RemotingCommand) -> None:
        sign = self._sign
        body = cmd.body
        if sign is None or cmd.is_response:
            header = encode_header(cmd)
            prefix = frame_prefix(len(header), len(body))
        self.last_sent = time.monotonic()
        try:
            with self._send_lock:
                if sign is not None and not cmd.is_response:
                    # signed (and numbered) under the lock: numbers go out rising
                    sign(cmd.ext, body)
                    header = encode_header(cmd)
                    prefix = frame_prefix(len(header), len(body))
                if len(body) < _SMALL_BODY:
                    self._sock.sendall(b"".join((prefix, header, body)))
                else:
                    self._sock.sendall(prefix + header)
                    self._sock.sendall(body)
        except OSError as exc:
            self.close(RemotingError(f"sending to {self.addr} failed: {exc.strerror or exc}"))
            raise RemotingError(f"sending to {self.addr} failed: {exc.strerror or exc}") from None

    def dropped_by_server(self) -> bool:
        """Whether the server closed this connection while nobody was reading it (then it
        is closed here too). Only an idle connection is looked at: with a reader thread
        or a caller reading, they learn it themselves; bytes waiting mean it is alive."""
        if self.closed:
            return True
        if self._reader is not None or self._calls or not self._read_lock.acquire(blocking=False):
            return False
        try:
            # None: nothing to read, still open; b"": closed now
            return self._recv(1, socket.MSG_PEEK | _DONTWAIT) == b""
        finally:
            self._read_lock.release()

    def _register(self, cmd: RemotingCommand, call: _Call) -> None:
        if self.closed:
            raise RemotingError(f"the connection to {self.addr} is closed")
        cmd.opaque = next(self._opaque) & 0x7FFFFFFF
        self._calls[cmd.opaque] = call

    def invoke(
        self,
        cmd: RemotingCommand,
        timeout_s: float,
        *,
        busy_poll: bool = True,
        background: bool = False,
    ) -> RemotingCommand:
        """Send a request and wait for its answer.

        Without a reader thread, one waiting caller at a time reads the socket for
        everyone (handing each answer to its caller) until its own answer is in,
        then wakes another waiting caller to take over. That caller first polls the
        socket without blocking for ``busy_poll_s`` (unless ``busy_poll`` is False,
        e.g. for a long poll, whose answer is not expected soon): an answer that comes
        within it costs no wake-up of a sleeping thread (see
        ``connector.server.busy_poll`` for what that saves). ``background``: a rare
        call (a heartbeat) that never starts the reader thread: it waits for the
        caller reading to hand its answer over, so a lone sender that it happened to
        overlap keeps reading its own answers (a reader thread, once started, reads
        for as long as requests are in flight: for good under a steady sender).
        """
        call = _Call()
        self._register(cmd, call)
        try:
            self._send(cmd)
        except RemotingError:
            self._calls.pop(cmd.opaque, None)
            raise
        lock = call.lock
        assert lock is not None
        now = time.monotonic()
        deadline = now + max(timeout_s, 0.0)
        # polling never outlasts the call's own time
        polling = min(now + self.busy_poll_s, deadline) if busy_poll else 0.0
        while not call.finished:
            if self._reader is None and self._read_lock.acquire(blocking=False):
                try:
                    self._read_until(call, deadline, polling)
                finally:
                    self._read_lock.release()
                    self._hand_over()
            else:
                if self._reader is None and not background:
                    # callers on several threads: a reader of its own reads without
                    # pausing between answers (taking turns costs a wake-up per turn)
                    self.start_reader()
                left = deadline - time.monotonic()
                if left <= 0 or not lock.acquire(timeout=left):
                    break
            if time.monotonic() >= deadline:
                break
        if not call.finished:
            self._calls.pop(cmd.opaque, None)
            if not call.finished:
                raise RemotingTimeoutError(
                    f"no answer from {self.addr} within {timeout_s * 1000:.0f} ms (code {cmd.code})"
                )
        if call.error is not None:
            raise call.error
        assert call.response is not None
        return call.response

    def _read_until(self, call: _Call, deadline: float, polling: float = 0.0) -> None:
        """Read (holding the read lock) until ``call`` is answered or its time is up;
        until ``polling`` (monotonic) without blocking."""
        while not call.finished and not self.closed:
            if polling and time.monotonic() < polling:
                if not self._read_some(_DONTWAIT):
                    _yield()  # the core to any thread that can use it meanwhile
            elif not self._read_some() and time.monotonic() >= deadline:
                return

    def _hand_over(self) -> None:
        """Wake one caller still waiting, to read for the others."""
        for other in list(self._calls.values()):
            if other.lock is not None and not other.finished:
                other.wake()
                return

    def invoke_async(
        self, cmd: RemotingCommand, callback: Callback, timeout_s: float | None = None
    ) -> int:
        """Send a request; ``callback(response, error)`` runs once: on the reader thread
        when it is answered or the connection breaks, or on the client's timer thread
        with a ``RemotingTimeoutError`` after ``timeout_s`` (needs ``timeouts``)."""
        call = _Call(callback)
        self._register(cmd, call)  # before start_reader: an ending reader sees the call
        try:
            self.start_reader()
            self._send(cmd)
        except RemotingError:
            self._calls.pop(cmd.opaque, None)
            raise
        if timeout_s is not None and self.timeouts is not None:
            self.timeouts.watch(self, cmd.opaque, cmd.code, timeout_s)
        return cmd.opaque

    def expire(self, opaque: int, code: int, timeout_s: float) -> None:
        """The timer's verdict: a request still unanswered fails with a timeout."""
        call = self._calls.pop(opaque, None)
        if call is not None:
            call.done(
                None,
                RemotingTimeoutError(
                    f"no answer from {self.addr} within {timeout_s * 1000:.0f} ms (code {code})"
                ),
            )

    def cancel(self, opaque: int) -> bool:
        """Forget a request in flight (its answer, if it comes, is dropped); False if it
        was already answered."""
        return self._calls.pop(opaque, None) is not None

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        cmd.opaque = next(self._opaque) & 0x7FFFFFFF
        cmd.flag |= FLAG_ONEWAY
        self._send(cmd)

    def send_response(self, response: RemotingCommand) -> None:
        """Answer a request the server sent (``on_request``)."""
        self._send(response)

    # -- reading -----------------------------------------------------------------------

    def _recv(self, size: int, flags: int = 0) -> bytes | None:
        """One recv: the bytes, None if nothing came (the read slice of SO_RCVTIMEO ended,
        or nothing waits), b"" if the connection is closed now (by the server, or broken)."""
        try:
            if self.tls and flags:
                return self._recv_tls(size, flags)
            data = self._sock.recv(size, flags)
        except (BlockingIOError, InterruptedError, TimeoutError, ssl.SSLWantReadError):
            return None
        except OSError as exc:
            self.close(RemotingError(f"connection to {self.addr} broke: {exc.strerror or exc}"))
            return b""
        if not data:
            self.close(RemotingError(f"{self.addr} closed the connection"))
        return data

    def _recv_tls(self, size: int, flags: int) -> bytes | None:
        """``recv`` with flags on a TLS socket, which takes none: a peek looks at the TCP
        bytes under TLS (b"" there: closed); MSG_DONTWAIT reads only if a TLS record is
        buffered or bytes wait on the socket."""
        sock = self._sock
        if flags & socket.MSG_PEEK:
            raw = socket.socket.recv(sock, size, flags)  # the bytes under TLS, not decrypted
            if not raw:
                self.close(RemotingError(f"{self.addr} closed the connection"))
            return raw
        assert isinstance(sock, ssl.SSLSocket)
        if not sock.pending() and not select.select([sock], [], [], 0)[0]:
            return None
        data = sock.recv(size)
        if not data:
            self.close(RemotingError(f"{self.addr} closed the connection"))
        return data

    def _read_some(self, flags: int = 0, reader: threading.Thread | None = None) -> bool:
        """One recv (at most a read slice long; with ``MSG_DONTWAIT`` in ``flags``, none)
        and the frames it completes, each answer handed to its caller; False if nothing
        came. Read lock held; by the reader thread ``reader``, it is let go around each
        callback (``_guarded``), and not held on return if another reader took over."""
        # the rest of a large frame (a big pull answer) in as few pieces as it comes
        data = self._recv(min(max(_RECV, self._decoder.missing), _RECV_LARGE), flags)
        if not data:
            return False
        try:
            commands = self._decoder.feed(data)
        except FrameError as exc:
            log.warning("closing the connection to %s: %s", self.addr, exc)
            if isinstance(exc, HttpPeerError):
                reason = f"{self.addr} is an HTTP (REST) port, not a remoting port"
                self.close(RemotingError(reason))
            else:
                self.close(RemotingError(f"{self.addr} sent a frame that does not parse: {exc}"))
            return False
        for cmd in commands:
            if cmd.is_response:
                call = self._calls.pop(cmd.opaque, None)
                if call is None:
                    continue
                if call.callback is None or reader is None:
                    call.done(cmd, None)
                else:
                    reader = self._guarded(reader, call.done, cmd, None)
            elif self._on_request is not None:
                if reader is None:
                    self._handle(cmd)
                else:
                    reader = self._guarded(reader, self._handle, cmd)
        return True

    def _handle(self, cmd: RemotingCommand) -> None:
        assert self._on_request is not None
        try:
            self._on_request(self, cmd)
        except Exception:  # a defect in a handler: logged, the connection goes on
            log.exception("handling request code %d from %s failed", cmd.code, self.addr)

    def _guarded(
        self, reader: threading.Thread, fn: Callable[..., None], *args: object
    ) -> threading.Thread | None:
        """``fn(*args)`` on the reader thread with the read lock let go, so that the timer
        can hand the reading to a new thread if it takes over ``STALL_S``
        (``take_over_if_stalled``). ``reader`` again if it still reads (the lock is
        held again), None if it was replaced (the lock is the new reader's now)."""
        self._callback_since = time.monotonic()
        self._read_lock.release()
        try:
            fn(*args)
        finally:
            with self._reader_lock:
                if self._reader is reader:
                    self._callback_since = 0.0
                    self._read_lock.acquire()  # nobody else takes it while we are reader
                    still: threading.Thread | None = reader
                else:
                    still = None
        return still

    def _read_loop(self) -> None:
        me = threading.current_thread()
        self._read_lock.acquire()
        while not self.closed:
            if self._read_some(reader=me):
                if self._reader is not me:  # a callback overran: another thread reads now
                    return
                continue
            if self._on_request is not None:
                continue
            # a quiet slice with no request in flight: callers read for themselves
            # again (with one in flight, e.g. long polls of several threads, this
            # thread stays rather than be started again by the next waiter)
            with self._reader_lock:
                if self._calls:
                    continue
                self._reader = None
                if self.timeouts is not None:
                    self.timeouts.guard(self, False)
            break
        self._read_lock.release()
        for call in list(self._calls.values()):  # sync callers waiting on this thread
            if call.lock is not None and not call.finished:
                call.wake()

    def close(self, error: RemotingError | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
        if self.timeouts is not None:
            self.timeouts.guard(self, False)
        err = error or RemotingError(f"the connection to {self.addr} was closed")
        calls, self._calls = self._calls, {}
        for call in calls.values():
            call.done(None, err)
        if self._on_close is not None:
            self._on_close(self)


class RemotingClient:
    """One connection per server address, created when first needed."""

    def __init__(
        self,
        *,
        connect_timeout_s: float = 3.0,
        on_request: RequestHandler | None = None,
        busy_poll_us: int = 0,
        credentials: Credentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if busy_poll_us < 0:
            raise ConfigError("busy_poll_us must not be negative")
        self.credentials = credentials
        self.sequence = SignSequence() if credentials is not None else None
        self.tls = tls
        self.connect_timeout_s = connect_timeout_s
        self.on_request = on_request
        self.busy_poll_s = busy_poll_us / 1e6
        self.timeouts = Timeouts()
        self._conns: dict[str, RemotingConnection] = {}
        self._lock = threading.Lock()
        self._closed = False

    def listen(self, on_request: RequestHandler) -> None:
        """From now on every connection (those open and those to come) hands the
        server's requests to ``on_request``, read by a thread of its own."""
        with self._lock:
            self.on_request = on_request
            conns = list(self._conns.values())
        for conn in conns:
            conn.listen(on_request)

    def connection(self, addr: str) -> RemotingConnection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            if time.monotonic() - conn.last_sent < STALE_CHECK_IDLE_S:
                return conn
            if not conn.dropped_by_server():
                return conn
            log.info("%s had closed the idle connection: connecting again", addr)
        if self._closed:
            raise RemotingError("this client was shut down")
        # connect outside the lock: a server that does not answer must not hold up
        # connections to the others
        fresh = RemotingConnection(
            addr,
            connect_timeout_s=self.connect_timeout_s,
            on_request=self.on_request,
            on_close=self._forget,
            timeouts=self.timeouts,
            busy_poll_s=self.busy_poll_s,
            credentials=self.credentials,
            sequence=self.sequence,
            tls=self.tls,
        )
        with self._lock:
            current = self._conns.get(addr)
            if not self._closed and (current is None or current.closed):
                self._conns[addr] = fresh
                return fresh
        fresh.close()  # another thread connected first, or the client was shut down
        if current is None or current.closed:
            raise RemotingError("this client was shut down")
        return current

    def _forget(self, conn: RemotingConnection) -> None:
        with self._lock:
            if self._conns.get(conn.addr) is conn:
                del self._conns[conn.addr]

    def invoke(
        self,
        addr: str,
        cmd: RemotingCommand,
        timeout_s: float,
        *,
        busy_poll: bool = True,
        background: bool = False,
    ) -> RemotingCommand:
        return self.connection(addr).invoke(
            cmd, timeout_s, busy_poll=busy_poll, background=background
        )

    def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        self.connection(addr).invoke_oneway(cmd)

    def connections(self) -> list[RemotingConnection]:
        with self._lock:
            return list(self._conns.values())

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()
        self.timeouts.close()

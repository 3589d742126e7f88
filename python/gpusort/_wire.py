"""Frames on the Unix socket: the 24-byte header, the body, and descriptors (SCM_RIGHTS).

proto/README.md is the authority. A frame is ``magic 'GPSR' | version u16 | type u16 |
body_length u32 | reserved u32 | request_id u64`` (all little-endian), then the protobuf body.

Descriptors: the daemon sends a frame's descriptors with the frame's first byte, and the kernel
hands them out with the recvmsg that reads that byte. This reader never asks for more than the
rest of the frame it is reading, so every descriptor it receives belongs to that frame (the
README's rule "the descriptors of a read belong to the frame that holds its last byte" then
holds trivially). Frames are small (at most 64 KiB), so the extra system call per frame costs
nothing next to a sort.
"""

from __future__ import annotations

import array
import os
import socket
import struct

from ._errors import ConnectionLost, Error

MAGIC = 0x52535047  # b"GPSR" read as a little-endian u32
HEADER = struct.Struct("<IHHIIQ")
assert HEADER.size == 24
MAX_BODY = 65536
MAX_FDS = 4  # the daemon never sends more with one frame; room for them is what we ask

# Message types (proto/README.md's table; the proto enum MessageType).
HELLO = 0x0001
ALLOCATE = 0x0002
RELEASE = 0x0003
SUBMIT = 0x0004
CANCEL = 0x0005
JOB_STATUS = 0x0006
DAEMON_STATUS = 0x0007
ERROR = 0x8000
HELLO_REPLY = 0x8001
ALLOCATE_REPLY = 0x8002
RELEASE_REPLY = 0x8003
SUBMIT_REPLY = 0x8004
CANCEL_REPLY = 0x8005
JOB_STATUS_REPLY = 0x8006
DAEMON_STATUS_REPLY = 0x8007
PROGRESS = 0xC001
JOB_FINISHED = 0xC002


class Frame:
    """One frame read from the daemon: type, version, request id, body and descriptors (ints,
    owned by the frame's reader: close the ones you do not keep)."""

    __slots__ = ("type", "version", "request_id", "body", "fds")

    def __init__(self, type_: int, version: int, request_id: int, body: bytes, fds: list[int]):
        self.type = type_
        self.version = version
        self.request_id = request_id
        self.body = body
        self.fds = fds

    def close_fds(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []


def encode_header(type_: int, request_id: int, body_length: int, version: int = 1) -> bytes:
    return HEADER.pack(MAGIC, version, type_, body_length, 0, request_id)


class Wire:
    """A connected Unix stream socket that sends and receives frames. Not thread-safe: the
    Client serialises its use."""

    def __init__(self, path: str, timeout: float | None):
        self.path = path
        self.timeout = timeout
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except BaseException:
            self.sock.close()
            raise
        self.closed = False

    # -- sending ---------------------------------------------------------------------------

    def send(self, type_: int, request_id: int, body: bytes, fds=(), version: int = 1) -> None:
        """Sends one frame. Its descriptors travel in one SCM_RIGHTS message with the frame's
        first bytes and no byte of another frame (proto/README.md, "Descriptors")."""
        if len(body) > MAX_BODY:
            raise ValueError(f"frame body of {len(body)} bytes is over the limit of {MAX_BODY}")
        data = encode_header(type_, request_id, len(body), version) + body
        self._check_open()
        self.sock.settimeout(self.timeout)
        try:
            if fds:
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
                sent = self.sock.sendmsg([data], anc, socket.MSG_NOSIGNAL)
                if sent < len(data):  # the kernel took part of it: the rest with plain writes
                    self.sock.sendall(data[sent:])
            else:
                self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as e:
            # The daemon may have refused us (UNAUTHORIZED, REJECTED_BUSY) and closed: its
            # ERROR frame can still be waiting in our receive queue; the reader reports it.
            raise _SendFailed(e) from e
        except socket.timeout as e:
            raise Error("TIMEOUT", f"gpusortd at {self.path} did not take a request within "
                        f"{self.timeout} s") from e

    # -- receiving -------------------------------------------------------------------------

    def recv(self, timeout: float | None = -1.0) -> Frame:
        """The next frame. ``timeout`` -1: the Wire's own; None: wait for ever (a closed
        connection still ends the wait at once: the kernel reports EOF when the daemon dies).
        Raises ConnectionLost on EOF or a socket error, Error on a frame it cannot parse (and
        closes the connection, as the README asks of a client)."""
        self._check_open()
        self.sock.settimeout(self.timeout if timeout == -1.0 else timeout)
        fds: list[int] = []
        try:
            header = self._read_exactly(HEADER.size, fds, first=True)
            magic, version, type_, length, reserved, request_id = HEADER.unpack(header)
            if magic != MAGIC or length > MAX_BODY:
                self.close()
                what = "bad magic" if magic != MAGIC else f"a body of {length} bytes"
                raise Error("PROTOCOL_ERROR",
                            f"gpusortd at {self.path} sent an unreadable frame ({what}); "
                            "connection closed")
            body = self._read_exactly(length, fds, first=False) if length else b""
        except BaseException:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            raise
        return Frame(type_, version, request_id, body, fds)

    def _read_exactly(self, n: int, fds: list[int], first: bool) -> bytes:
        chunks = []
        left = n
        anc_room = socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)
        while left > 0:
            try:
                data, anc, flags, _ = self.sock.recvmsg(left, anc_room, socket.MSG_CMSG_CLOEXEC)
            except socket.timeout as e:
                if first and left == n:
                    raise Error("TIMEOUT", f"no answer from gpusortd at {self.path} within "
                                f"{self.sock.gettimeout()} s") from e
                self.close()  # in the middle of a frame: the stream cannot be resynchronised
                raise Error("TIMEOUT", f"gpusortd at {self.path} stopped in the middle of a "
                            "frame; connection closed") from e
            except OSError as e:
                self.close()
                raise ConnectionLost("CONNECTION_LOST",
                                     f"connection to gpusortd at {self.path} failed: {e}") from e
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(payload[: len(payload) - len(payload) % a.itemsize])
                    fds.extend(a)
            if flags & socket.MSG_CTRUNC:
                self.close()
                raise Error("PROTOCOL_ERROR", "gpusortd sent more descriptors than a frame may "
                            "carry; connection closed")
            if not data:
                self.close()
                raise ConnectionLost("CONNECTION_LOST",
                                     f"gpusortd at {self.path} closed the connection"
                                     + ("" if first and left == n else
                                        " in the middle of a frame"))
            chunks.append(data)
            left -= len(data)
        return b"".join(chunks)

    def _check_open(self) -> None:
        if self.closed:
            raise ConnectionLost("CONNECTION_LOST", f"the connection to gpusortd at {self.path} "
                                 "is closed")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass


class _SendFailed(Exception):
    """A write failed because the daemon closed the connection; the Client then reads the
    frame the daemon may have left (an ERROR saying why) before it reports ConnectionLost."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause

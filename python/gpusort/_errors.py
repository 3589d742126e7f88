"""The exceptions of the gpusort package."""

from __future__ import annotations


class Error(Exception):
    """A failure reported by gpusortd, or one talking to it.

    ``status`` is the protocol's status name (``"TOO_LARGE"``, ``"BAD_REQUEST"``, ... see
    proto/README.md "Status codes"; ``"CODE_<n>"`` for a code this client does not know), or one
    of this client's own: ``"CONNECTION_LOST"``, ``"UNAVAILABLE"`` (no daemon at the socket),
    ``"TIMEOUT"``. ``message`` is the daemon's one line for people.
    """

    def __init__(self, status: str, message: str):
        super().__init__(f"{status}: {message}" if message else status)
        self.status = status
        self.message = message

    def __reduce__(self):
        # Exception pickles only the one string it was given, which __init__ cannot take back:
        # without this, distributed (which pickles a task's exception and checks that it loads)
        # hands the caller a bare Exception holding the error's repr.
        return type(self), (self.status, self.message)


class ConnectionLost(Error):
    """The connection to the daemon ended (the daemon stopped or was killed, or closed the
    connection after a fatal error). A job in flight on it is lost; a shared array made by
    ``Client.empty`` stays readable (its memory stays mapped) but the client cannot sort any more."""


class Unavailable(Error):
    """No daemon could be reached at the socket (missing, refused, no permission)."""

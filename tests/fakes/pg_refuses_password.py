"""A server on 127.0.0.1 that answers a PostgreSQL client's start-up as PostgreSQL does when it
refuses the password: ``FATAL 28P01 password authentication failed for user "NAME"``.

The suite's PostgreSQL trusts every connection from 127.0.0.1 (it never asks for a password),
so a wrong password cannot be produced there; with this server the client (libpq through
psycopg) receives the server's refusal over the wire and words the error itself, as it does for
a real server.

    with RefusingPostgres() as pg:
        ... AGENTBOARD_DATABASE_URL=pg.url("postgres", "wrong") ...
"""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

#: the codes of the requests a client sends before its start-up message (SSL, GSS encryption)
_NEGOTIATE = (80877103, 80877104)


class RefusingPostgres:
    def __init__(self) -> None:
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self.refused: list[str] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def url(self, user: str, password: str, database: str = "agentboard") -> str:
        return f"postgresql://{user}:{password}@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> RefusingPostgres:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed
                return
            with conn:
                try:
                    self._refuse(conn)
                except OSError:
                    pass

    def _refuse(self, conn: socket.socket) -> None:
        while True:
            head = conn.recv(8, socket.MSG_WAITALL)
            if len(head) < 8:
                return
            length, code = struct.unpack("!ii", head)
            body = conn.recv(length - 8, socket.MSG_WAITALL) if length > 8 else b""
            if code in _NEGOTIATE:
                conn.sendall(b"N")  # no SSL, no GSS: go on in plain text
                continue
            words = body.split(b"\0")
            user = words[words.index(b"user") + 1].decode() if b"user" in words else ""
            self.refused.append(user)
            fields = [b"SFATAL", b"VFATAL", b"C28P01",
                      f'Mpassword authentication failed for user "{user}"'.encode(),
                      b"Fauth.c", b"L323", b"Rauth_failed"]
            payload = b"".join(f + b"\0" for f in fields) + b"\0"
            conn.sendall(b"E" + struct.pack("!i", len(payload) + 4) + payload)
            return

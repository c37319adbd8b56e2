#!/usr/bin/env python3
"""Bad clients for the rendezvous store (tests/integration/comm/store_attack_test.sh).

store_attacker.py PORT ROUNDS SILENT: connects to 127.0.0.1:PORT, retrying until
the store listens (up to 60 s), then runs ROUNDS rounds of five bad clients in
turn: 2 KiB of random bytes, a frame announcing 2 GiB, a 64 KiB frame of
garbage, a heartbeat before any join, and a join with another job's token; and
holds SILENT connections open that send nothing. Each client waits up to 15 s
for the store to close on it; after the last it prints "attacker: rounds
done" (the test then lets the other ranks join). Once the job has formed the
store no longer listens: a client whose connection the kernel refuses is
counted as refused at connect (the store never saw it). Prints one line:
  attacker: tried N, refused R (closed by the store), C refused at connect,
  silent S of S dropped
and exits 1 if any bad client was neither refused nor kept out.
"""
import os
import socket
import struct
import sys
import time


def frame(body):
    return struct.pack("<I", len(body)) + body


def pb_bytes(field, data):
    return bytes([(field << 3) | 2]) + varint(len(data)) + data


def pb_int(field, value):
    return bytes([(field << 3) | 0]) + varint(value)


def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def wrong_token_join():
    join = (pb_bytes(1, b"intruder-token") + pb_int(2, 1) + pb_int(3, 4) +
            pb_bytes(4, b"x" * 100) + pb_bytes(5, b"attacker"))
    return frame(pb_bytes(1, join))  # ClientMessage.join


PAYLOADS = [
    ("random", lambda: os.urandom(2048)),
    ("2GiB frame", lambda: struct.pack("<I", 2 << 30) + os.urandom(64)),
    ("garbage frame", lambda: frame(b"\xff" * 65536)),
    ("heartbeat first", lambda: frame(b"\x1a\x00")),
    ("wrong token", wrong_token_join),
]


def connect(port, deadline):
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.01)


def connect_once(port):
    """A socket, or None when the kernel refuses (nobody listens any more)."""
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=5)
    except ConnectionRefusedError:
        return None


def closed_by_peer(sock, timeout):
    """True when the store closes the connection within `timeout` seconds."""
    sock.settimeout(timeout)
    end = time.time() + timeout
    try:
        while time.time() < end:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def main():
    port, rounds, silent = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    deadline = time.time() + 60
    first = connect(port, deadline)  # the store listens from here on
    quiet = [first] + [connect_once(port) for _ in range(silent - 1)]
    at_connect = sum(1 for s in quiet if s is None)
    quiet = [s for s in quiet if s is not None]
    tried = refused = 0
    not_refused = []
    for _ in range(rounds):
        for name, make in PAYLOADS:
            tried += 1
            s = connect_once(port)
            if s is None:
                at_connect += 1
                continue
            try:
                s.sendall(make())
            except (BrokenPipeError, ConnectionResetError):
                pass
            if closed_by_peer(s, 15):
                refused += 1
            else:
                not_refused.append(name)
            s.close()
    print("attacker: rounds done", flush=True)
    dropped = sum(1 for s in quiet if closed_by_peer(s, 15))
    print("attacker: tried %d, refused %d (closed by the store), %d refused at connect, "
          "silent %d of %d dropped"
          % (tried + silent, refused + dropped, at_connect, dropped, len(quiet)), flush=True)
    if not_refused:
        print("attacker: not refused: %s" % ", ".join(sorted(set(not_refused))))
    kept_out = refused + dropped + at_connect
    return 0 if kept_out == tried + silent and dropped == len(quiet) else 1


if __name__ == "__main__":
    sys.exit(main())

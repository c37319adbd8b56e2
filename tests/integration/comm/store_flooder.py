#!/usr/bin/env python3
"""A connection flood and slow-loris clients against the rendezvous store
(tests/integration/comm/store_flood_test.sh).

store_flooder.py PORT STOP_FILE: until STOP_FILE exists (at most 300 s), from
three loopback source addresses, as three strangers on other hosts would:
  flood  (127.0.0.2) keeps up to 400 connections open, opening at most
         RATE per second, and opens new ones as the store closes old ones;
  loris  (127.0.0.3) 16 connections that each send one byte of a frame every
         250 ms, and reconnect when closed;
  silent (127.0.0.1, the ranks' own address) 8 connections that send nothing.
Once the job formed the store no longer listens: connects are refused by the
kernel and counted as such. Prints one line at the end:
  flooder: connects N, refused at connect R, closed by the store C,
  most held at once H, loris bytes B, flood rate F/s
"""
import os
import select
import socket
import sys
import threading
import time

RATE = 200
FLOOD_HOLD = 400
LORIS = 16
SILENT = 8

lock = threading.Lock()
stats = {"connects": 0, "refused": 0, "closed": 0, "held": 0, "most_held": 0, "loris_bytes": 0}


def bump(key, n=1):
    with lock:
        stats[key] += n
        if key == "held":
            stats["most_held"] = max(stats["most_held"], stats["held"])


def connect_from(source, port):
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
    except OSError:
        s.close()
        bump("refused")
        return None
    s.setblocking(False)
    bump("connects")
    bump("held")
    return s


def drop_closed(socks):
    """Removes the sockets the store closed (readable with EOF or an error)."""
    if not socks:
        return socks
    readable, _, _ = select.select(socks, [], [], 0)
    gone = set()
    for s in readable:
        try:
            data = s.recv(65536)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if not data:
            gone.add(s)
    for s in gone:
        s.close()
        bump("closed")
        bump("held", -1)
    return [s for s in socks if s not in gone]


def flood(port, stop):
    socks = []
    while not stop():
        tick = time.time()
        socks = drop_closed(socks)
        for _ in range(RATE // 20):
            if len(socks) >= FLOOD_HOLD:
                break
            s = connect_from("127.0.0.2", port)
            if s is not None:
                socks.append(s)
        time.sleep(max(0.0, 0.05 - (time.time() - tick)))


def loris(port, stop):
    # A frame header announcing 64 KiB, then its bytes, one at a time.
    wire = (65536).to_bytes(4, "little") + b"\x0a" * 65536
    socks = {}
    while not stop():
        alive = set(drop_closed(list(socks)))
        socks = {s: at for s, at in socks.items() if s in alive}
        while len(socks) < LORIS and not stop():
            s = connect_from("127.0.0.3", port)
            if s is None:
                break
            socks[s] = 0
        for s in list(socks):
            try:
                s.send(wire[socks[s]:socks[s] + 1])
                socks[s] += 1
                bump("loris_bytes")
            except OSError:
                pass
        time.sleep(0.25)


def silent(port, stop):
    socks = []
    while not stop():
        socks = drop_closed(socks)
        while len(socks) < SILENT and not stop():
            s = connect_from("127.0.0.1", port)
            if s is None:
                break
            socks.append(s)
        time.sleep(0.25)


def main():
    port = int(sys.argv[1])
    stop_file = sys.argv[2]
    start = time.time()

    def stop():
        return os.path.exists(stop_file) or time.time() - start > 300

    threads = [threading.Thread(target=f, args=(port, stop)) for f in (flood, loris, silent)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - start
    print("flooder: connects %d, refused at connect %d, closed by the store %d, most held at "
          "once %d, loris bytes %d, flood rate %.0f/s" %
          (stats["connects"], stats["refused"], stats["closed"], stats["most_held"],
           stats["loris_bytes"], (stats["connects"] + stats["refused"]) / elapsed))


if __name__ == "__main__":
    main()

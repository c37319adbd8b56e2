#!/usr/bin/env python3
"""Kills one rank of a train_gpt job and prints what follows, timed.

  tools/kill_timeline.py BINARY STEP RANK [train_gpt flags...]

Starts BINARY (train_gpt) with the flags, sends SIGKILL to the process
launched with RANK=<RANK> as soon as the progress line of step STEP appears,
then prints every later line of the job's output with the seconds since the
kill: the launcher's verdict, the survivors' handover, the next attempt's
resume and its steps (docs/failures.md, "Measured").
"""
import os
import signal
import subprocess
import sys
import time


def rank_pid(parent, rank):
    with open(f"/proc/{parent}/task/{parent}/children") as f:
        children = f.read().split()
    for child in children:
        try:
            with open(f"/proc/{child}/environ", "rb") as f:
                if f"RANK={rank}".encode() in f.read().split(b"\0"):
                    return int(child)
        except OSError:
            pass
    return None


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binary, step, rank = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    proc = subprocess.Popen([binary] + sys.argv[4:], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    marker = "step %4d/" % step
    killed_at = None
    for line in proc.stdout:
        now = time.time()
        if killed_at is None:
            if marker in line:
                victim = rank_pid(proc.pid, rank)
                if victim is None:
                    sys.exit(f"no process with RANK={rank}")
                killed_at = time.time()
                os.kill(victim, signal.SIGKILL)
            continue
        print(f"{now - killed_at:7.3f} {line.rstrip()}")
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())

"""The userspace delay line: holds each packet of one NFQUEUE for its delay, or drops it.

Run inside the router namespace, one process per direction::

    python -m tcplab.lab.delayline --queue 1 --delay 0.01 --jitter 0 --loss 0 --seed 1

It does what netem's delay, jitter and loss do, for kernels without sch_netem: a packet
is released ``delay + U(-jitter, +jitter)`` after it arrived (netem's default jitter
distribution is uniform too), or dropped with probability ``loss``. Without jitter the
release order is the arrival order; with jitter packets may overtake each other, as
they do under netem.

One thread, one loop: wait on the queue's socket until the next release is due, take in
whatever arrived, release whatever is due. Verdicts are given later than the callback,
which NetfilterQueue allows; the kernel keeps the packets meanwhile (copy mode "meta":
we never need the payload, so none is copied to userspace).
"""

from __future__ import annotations

import argparse
import heapq
import os
import random
import select
import signal
import socket
import sys
import time
from collections import deque

from .lateness import Lateness, Snapshots, prepare_helper, write_stats

SO_TIMESTAMP = 29  # asm-generic/socket.h; Python does not export it
#: How much earlier than due a packet may leave: below the scheduler's noise, and it lets
#: one wake-up release a burst of packets that are due within a few microseconds.
EARLY_OK = 20e-6


class Line:
    def __init__(self, delay: float, jitter: float, loss: float, seed: int) -> None:
        self.delay = delay
        self.jitter = jitter
        self.loss = loss / 100.0
        self.rng = random.Random(seed)
        # FIFO when every packet waits the same time; a heap when jitter reorders them.
        self.fifo: deque = deque()
        self.heap: list = []
        self.seq = 0
        self.received = 0
        self.stamped = 0
        self.dropped = 0
        self.released = 0
        self.max_held = 0
        self.late = Lateness()

    def arrive(self, pkt) -> None:
        now = time.monotonic()
        # The kernel stamped the packet when the router received it; we hear of it only
        # after a wake-up. Count the delay from the stamp, so that wait is not added on top.
        stamp = pkt.get_timestamp()
        if stamp > 0:
            backlog = time.time() - stamp
            if 0.0 < backlog < 0.05:
                now -= backlog
                self.stamped += 1
        self.received += 1
        if self.loss and self.rng.random() < self.loss:
            self.dropped += 1
            pkt.drop()
            return
        if self.jitter:
            due = now + max(0.0, self.delay + self.rng.uniform(-self.jitter, self.jitter))
            self.seq += 1
            heapq.heappush(self.heap, (due, self.seq, pkt))
        else:
            self.fifo.append((now + self.delay, pkt))
        held = len(self.fifo) + len(self.heap)
        if held > self.max_held:
            self.max_held = held

    def next_due(self) -> float | None:
        if self.fifo:
            return self.fifo[0][0]
        if self.heap:
            return self.heap[0][0]
        return None

    def release_due(self) -> None:
        now = time.monotonic() + EARLY_OK
        while self.fifo and self.fifo[0][0] <= now:
            due, pkt = self.fifo.popleft()
            self._release(pkt, now - due)
        while self.heap and self.heap[0][0] <= now:
            due, _, pkt = heapq.heappop(self.heap)
            self._release(pkt, now - due)

    def _release(self, pkt, late: float) -> None:
        pkt.accept()
        self.released += 1
        self.late.add(max(late - EARLY_OK, 0.0))

    def stats(self) -> dict:
        return {
            "received": self.received, "kernel_stamped": self.stamped, "released": self.released, "dropped": self.dropped,
            "held_at_exit": len(self.fifo) + len(self.heap), "max_held": self.max_held, **self.late.to_dict(),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", type=int, required=True, help="NFQUEUE number")
    parser.add_argument("--delay", type=float, required=True, help="seconds")
    parser.add_argument("--jitter", type=float, default=0.0, help="seconds, uniform ±")
    parser.add_argument("--loss", type=float, default=0.0, help="percent")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-held", type=int, default=200_000,
                        help="packets the kernel may hold for us (NFQUEUE max_len)")
    parser.add_argument("--ready-file", help="created once the queue is bound")
    parser.add_argument("--stats-file", help="JSON counters written at exit, and on SIGUSR1 (a snapshot)")
    args = parser.parse_args(argv)

    from netfilterqueue import COPY_META, NetfilterQueue

    prepare_helper()
    line = Line(args.delay, args.jitter, args.loss, args.seed)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    snapshots = Snapshots()

    # Any socket asking for receive timestamps makes the kernel stamp every packet on
    # arrival (a machine-wide switch); we need those stamps for the packets we delay.
    stamper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stamper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)

    nfq = NetfilterQueue()
    # A large socket buffer: at 1 Gbit/s a burst of queued packets must not overflow it.
    nfq.bind(args.queue, line.arrive, max_len=args.max_held, mode=COPY_META,
             sock_len=64 * 1024 * 1024)
    fd = nfq.get_fd()
    os.set_blocking(fd, False)
    if args.ready_file:
        open(args.ready_file, "w").close()
    cpu0 = time.process_time()
    t0 = time.monotonic()

    def stats() -> dict:
        return {**line.stats(), "cpu_s": time.process_time() - cpu0, "wall_s": time.monotonic() - t0,
                "snapshot": snapshots.taken}

    # Wake-ups come late by a fairly steady amount (scheduler, Python): aim that much early.
    lead = 0.0
    try:
        while not stopping:
            due = line.next_due()
            timeout = 0.5 if due is None else max(0.0, due - lead - time.monotonic())
            try:
                readable, _, _ = select.select([fd, snapshots], [], [], timeout)
            except InterruptedError:
                continue
            if due is not None and not readable:
                woke_late = time.monotonic() - (due - lead)
                lead = min(max(lead + 0.05 * (woke_late - lead), 0.0), 0.002)
            if fd in readable:
                nfq.run(block=False)
            line.release_due()
            if snapshots.wanted():
                write_stats(args.stats_file, stats())
    finally:
        write_stats(args.stats_file, stats())
        snapshots.close()
        nfq.unbind()
        stamper.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

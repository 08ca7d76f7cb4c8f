#!/usr/bin/python3
"""Summarises a fused MLP step trace (HPMC_FUSED_TRACE=file, see mlp_step.cu):
for each phase and event, the spread over blocks of its time (µs after the
kernel's first event), then the last blocks to end, event by event.
Usage: scripts/fused-trace.py trace.txt [LATE_BLOCKS]"""
import statistics
import sys
from collections import defaultdict

NAMES = {1: "phase", 2: "first chunk", 3: "summed", 4: "partial", 5: "counted",
         6: "finished", 7: "arrive", 8: "end",
         9: "head staged", 10: "head logits", 11: "head loss", 12: "start", 13: "waited",
         14: "issued"}
events = defaultdict(list)
clock = []  # each block's SM clock rate (GHz) over the step
for line in open(sys.argv[1]):
    b, e, t, c = map(int, line.split())
    events[b].append((e, t, c))
for evs in events.values():
    if evs[-1][1] > evs[0][1]:
        clock.append((evs[-1][2] - evs[0][2]) / (evs[-1][1] - evs[0][1]))
for b in events:
    events[b] = [(e, t) for e, t, _ in events[b]]
print(f"SM clock over the step: {min(clock):.2f}-{max(clock):.2f} GHz (median {statistics.median(clock):.2f})")
t0 = min(t for evs in events.values() for _, t in evs)
spread = defaultdict(list)
for evs in events.values():
    phase, seen = 0, defaultdict(int)
    for e, t in evs:
        if e == 1:
            phase, seen = phase + 1, defaultdict(int)
        spread[(phase, NAMES[e], seen[e])].append((t - t0) / 1000)
        seen[e] += 1
print("phase event           #   blocks   min    median   max   (µs)")
for key in sorted(spread, key=lambda k: (k[0], statistics.median(spread[k]))):
    v = spread[key]
    print(f"{key[0]:5} {key[1]:12} {key[2]:3} {len(v):7} {min(v):7.2f} {statistics.median(v):7.2f} {max(v):7.2f}")

# The blocks that end last, event by event: with the phases chained (no
# barriers) the step's length is theirs, so this is where its critical path shows.
late = int(sys.argv[2]) if len(sys.argv) > 2 else 8
ends = sorted(events, key=lambda b: max(t for _, t in events[b]))
print(f"\nblocks' ends (µs): first {(max(t for _, t in events[ends[0]]) - t0) / 1000:.2f}, "
      f"median {(max(t for _, t in events[ends[len(ends) // 2]]) - t0) / 1000:.2f}, "
      f"last {(max(t for _, t in events[ends[-1]]) - t0) / 1000:.2f}")
for b in ends[-late:]:
    print(f"block {b:3}: " + "  ".join(f"{NAMES[e]} {(t - t0) / 1000:.2f}" for e, t in events[b]))

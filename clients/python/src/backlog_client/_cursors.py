"""Claim cursors (docs/sql.md, "Claim cursors")."""

from __future__ import annotations

import time
from typing import Optional, Sequence

#: A claim cursor's key: (priority, run_at, id).
Key = tuple[int, int, int]
#: What a cursor is kept for: (queue, kinds), or RESCUE_FLOOR.
Scope = tuple[object, ...]


class Cursors:
    """Where this client's FIFO claims start on each shard of a queue: past the largest key
    `(priority, run_at, id)` it claimed there, so that a claim does not walk the index entries
    completed jobs leave while another session holds an old snapshot (docs/sql.md, "Claim
    cursors"). Now and then a claim is a full pass from the head, which finds what lies behind
    a cursor: at least 20 times its own last duration after the previous one, at most 10 s."""

    FACTOR, MAX_GAP = 20, 10.0

    def __init__(self) -> None:
        self.keys: dict[Scope, dict[int, Key]] = {}
        self.last_full: dict[Scope, float] = {}
        self.full_cost: dict[Scope, float] = {}
        self.floors: dict[Scope, int] = {}

    def plan(self, key: Scope) -> Optional[dict[int, Key]]:
        """The cursors of the next claim by shard, or None for a full pass."""
        now, last = time.monotonic(), self.last_full.get(key)
        gap = min(self.FACTOR * self.full_cost.get(key, 0.0), self.MAX_GAP)
        if last is None or now - last >= gap:
            self.last_full[key] = now
            return None
        return dict(self.keys.get(key, {}))

    def record(self, key: Scope, full: bool, took: float,
               reached: Sequence[tuple[int, Key]]) -> None:
        """What a claim reached: (shard, key) pairs; a cursor never moves back."""
        if full:
            self.full_cost[key] = took
        shards = self.keys.setdefault(key, {})
        for shard, k in reached:
            if shard not in shards or k > shards[shard]:
                shards[shard] = k

    def rewind(self) -> None:
        """Jobs may lie behind the cursors (a retry due at once, a release, a rescue): the
        next claims are full passes."""
        self.last_full.clear()

    def floor(self, key: Scope) -> int:
        """Where a scan other than a claim starts, on the claims' schedule of full passes: the
        rescue looks only at leases that expired since its last complete pass (docs/sql.md,
        "Rescue of expired leases"). FULL_PASS for a full pass."""
        if self.plan(key) is None:
            return FULL_PASS
        return self.floors.get(key, FULL_PASS)

    def floor_record(self, key: Scope, full: bool, took: float, reached: Optional[int]) -> None:
        """What a scan made from `floor` reached, if anything: the floor never moves back."""
        if full:
            self.full_cost[key] = took
        if reached is not None:
            self.floors[key] = max(self.floors.get(key, FULL_PASS), reached)


#: A scan's floor for a full pass from the head: the smallest 64-bit integer.
FULL_PASS = -(1 << 63)
#: The rescue's key among the cursors' floors.
RESCUE_FLOOR: Scope = ("rescue",)

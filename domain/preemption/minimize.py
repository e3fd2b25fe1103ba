"""Minimising a search's victims: give back every one the preemptor fits without.

A search takes candidates until the preemptor fits; the last one taken is needed by
construction, the others may not be. Kueue gives them back last to first, asking "does it still
fit" once per victim. `fill_back` makes the same decisions in runs (a speed-up; why it is exact
is said there), and `Runs` sums a run's usage without walking its victims (a speed-up).
"""

from __future__ import annotations

from domain.preemption.fit import fits
from domain.preemption.victims import Candidate, add_back
from domain.quota import FR, QuotaNode
from domain.state import ClusterQueueState


def fill_back(cq: ClusterQueueState, requests: dict[FR, int], allow_borrowing: bool,
              chosen: list[Candidate]) -> list[Candidate]:
    """Give back, last to first (the last one is needed by construction), every victim the
    preemptor still fits without; Kueue swaps the last element into the freed slot.

    Speed-up: Kueue asks "does it still fit" once per victim. Here runs of victims are given
    back at once. Exact: adding usage back never raises what a ClusterQueue has available, nor lowers
    whether it borrows (QuotaNode.available is non-increasing in every usage), so if the
    preemptor fits with a whole run restored, it fits at each step of restoring it one by
    one, and each is given back; a run that does not fit is halved until one victim is
    left, which is kept, as one by one. Runs double after each success (galloping), so a
    search that gives back most of its victims asks fits a logarithmic number of times."""
    n = len(chosen)
    given = [False] * n
    i = n - 2  # the next victim to decide; those after it are decided
    run = 1
    # After a run that does not fit, the next one (its right half) is already given back:
    # only its left half is removed again. The usage fits reads is the same sums either
    # way. `restored`: how many victims up to i are given back now.
    restored = 0
    back = Runs(chosen)
    while i >= 0:
        if run > i + 1:
            run = i + 1
        if restored > run:
            back.move(i - restored + 1, i - run + 1, -1)
        elif restored < run:
            back.move(i - run + 1, i - restored + 1, 1)
        restored = run
        if fits(cq, requests, allow_borrowing):
            for j in range(i - run + 1, i + 1):
                given[j] = True
            i -= run
            run *= 2
            restored = 0
        elif run == 1:
            back.move(i, i + 1, -1)
            i -= 1  # kept
            restored = 0
        else:
            run //= 2
    for i in range(n - 2, -1, -1):  # Kueue's list operations, with the decisions made
        if given[i]:
            chosen[i] = chosen[-1]
            chosen.pop()
    return chosen


_RUNS_MAX_NODES = 4  # more nodes than this: a search gives back as add_back does


class Runs:
    """Gives back (or removes again) runs of consecutive victims of one search's `chosen`.

    Speed-up of `add_back` in a give-back. A give-back walks `chosen` from its end in runs that
    grow and shrink, so summing each run's usage victim by victim (`add_back`) sums most
    victims several times. When every victim holds one and the same flavor-resource (Kueue's
    perf configs, most clusters' CPU-only cohorts) and they are removed at a few nodes (a flat
    cohort's common ancestor, the preemptor's own queue), each node keeps its victims'
    positions in `chosen` with running sums, built once, and a run's usage at a node is the
    difference of two of them. Exact: the additions are `add_back`'s: one per node the run
    meets, in the order it first meets them. Otherwise it is `add_back`."""

    __slots__ = ("chosen", "fr", "nodes", "positions", "sums")

    def __init__(self, chosen: list[Candidate]) -> None:
        self.chosen = chosen
        self.fr: FR | None = None
        self.nodes: list[QuotaNode] = []
        self.positions: list[list[int]] = []  # [node]: where its victims are in chosen
        self.sums: list[list[int]] = []  # [node][j]: the usage of its first j victims
        fr: FR | None = None
        nodes: list[QuotaNode] = []
        positions: list[list[int]] = []
        sums: list[list[int]] = []
        for i, c in enumerate(chosen):
            admission = c.ws.admission
            assert admission is not None
            usage = admission.usage
            if len(usage) != 1:
                return
            if fr is None:
                fr = next(iter(usage))
            value = usage.get(fr)
            if value is None:
                return
            node = c.at or c.cq.node
            g = 0
            while g < len(nodes) and nodes[g] is not node:
                g += 1
            if g == len(nodes):
                if g == _RUNS_MAX_NODES:
                    return
                nodes.append(node)
                positions.append([])
                sums.append([0])
            positions[g].append(i)
            group_sums = sums[g]
            group_sums.append(group_sums[-1] + value)
        self.fr, self.nodes, self.positions, self.sums = fr, nodes, positions, sums

    def move(self, lo: int, hi: int, sign: int) -> None:
        """Restore (1) or remove again (-1) the usage of chosen[lo:hi]."""
        fr = self.fr
        if fr is None:
            add_back(self.chosen[lo:hi], sign)
            return
        nodes, positions, sums = self.nodes, self.positions, self.sums
        if len(nodes) == 1:
            a, b = _first_at(positions[0], lo), _first_at(positions[0], hi)
            nodes[0].add_usage(fr, sign * (sums[0][b] - sums[0][a]))
            return
        met: list[tuple[int, int, int]] = []  # (first position in the run, node, usage)
        for g in range(len(nodes)):
            at = positions[g]
            a = _first_at(at, lo)
            if a < len(at) and at[a] < hi:
                b = _first_at(at, hi)
                met.append((at[a], g, sums[g][b] - sums[g][a]))
        met.sort()
        for _, g, usage in met:
            nodes[g].add_usage(fr, sign * usage)


def _first_at(positions: list[int], i: int) -> int:
    """bisect_left, compiled: the index of the first position >= i."""
    lo, hi = 0, len(positions)
    while lo < hi:
        mid = (lo + hi) // 2
        if positions[mid] < i:
            lo = mid + 1
        else:
            hi = mid
    return lo

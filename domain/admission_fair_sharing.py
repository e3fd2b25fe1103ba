"""Kueue's admission fair sharing: each LocalQueue's decayed usage, and how it orders a queue.

In a ClusterQueue with `admissionScope.admissionMode: UsageBasedAdmissionFairSharing` (and the
Configuration's `admissionFairSharing` set), pending workloads are ordered first by their
LocalQueue's usage, lowest first, then as usual (pkg/cache/queue/cluster_queue.go,
`queueOrderingFunc`). A LocalQueue's usage is its decayed consumed history plus the entry
penalties not yet settled, each resource weighted by `resourceWeights` (default 1), divided by the
LocalQueue's `fairSharing.weight` (pkg/util/admissionfairsharing, `CalculateUsage`).

The history moves as Kueue's ledger does (pkg/cache/queue/afs, pkg/controller/core
localqueue_controller.go `reconcileConsumedUsage` and workload_controller.go
`updateAfsConsumedUsage`):

- every `usageSamplingInterval` after its last update, it is decayed towards the LocalQueue's
  admitted usage: `consumed * keep + admitted * (1 - keep)`, `keep = 0.5 ** (elapsed /
  usageHalfLifeTime)` (`CalculateDecayedConsumed`); a half-life of 0 resets it to nothing;
- a workload that reserves quota pushes an entry penalty, its requests times
  `1 - 0.5 ** (interval / halfLife)` (`CalculateEntryPenalty`), counted at once;
- when it is admitted the penalty settles: the history is decayed for the time since its last
  update towards the admitted usage (now with the workload), the penalty is added, and the
  update time is now.

Time: quotaflow has no clock. Its time is the log's: the latest event `time` seen
(`State.clock`). A sampling that falls between two events is made when the next event is
applied, with the admitted usage as it stood (nothing changes between events), so the values are
Kueue's for a reconcile at each interval. The samplings since the admitted usage last changed are
folded in one step from the value at that change (`keep ** k`, rounded once, where Kueue rounds
at each of the k reconciles), so that they give the same nanos however they are grouped.

Arithmetic: values are integers in nano-units of the resource's base unit, as Kueue's quantities
after `MulByFloat` (which rounds down to 9 decimals). The decay factor `0.5 ** x` is computed in
integers, to 2**-64 (`_keep`: the same bits on every machine, where Kueue uses float64
`math.Pow`), and applied as an exact ratio with rounding down. A usage is the integer weighted
sum divided once into a float64 (correctly rounded: the same on every machine), compared as
Kueue compares its float64 usages; equal usages fall back to the base order.
"""

from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass, field
from decimal import Context, Decimal
from fractions import Fraction

from domain.fields import Fields

USAGE_BASED = "UsageBasedAdmissionFairSharing"
NO_ADMISSION_FAIR_SHARING = "NoAdmissionFairSharing"
ADMISSION_MODES = (USAGE_BASED, NO_ADMISSION_FAIR_SHARING)
DEFAULT_SAMPLING_NS = 5 * 60 * 10**9  # Kueue's default usageSamplingInterval: 5m

LQKey = tuple[str, str]  # (namespace, name)
Rank = tuple[int, float]  # (1 for an infinite usage, the usage): lower sorts first

_NANO = 10**9


@dataclass(frozen=True, slots=True)
class AdmissionFairSharing:
    """Configuration `admissionFairSharing`."""

    half_life_ns: int
    sampling_ns: int
    resource_weights: tuple[tuple[str, Fraction], ...] = ()
    # keep = 0.5 ** (interval / halfLife) for one sampling interval, as an exact ratio: the
    # entry penalty is requests * (1 - keep).
    tick_keep: tuple[int, int] = (1, 1)
    # the weights as integers over one denominator, so that a usage is summed in integers
    weight_den: int = 1
    weight_nums: tuple[tuple[str, int], ...] = ()

    def weight_of(self, resource: str) -> Fraction:
        for name, weight in self.resource_weights:
            if name == resource:
                return weight
        return Fraction(1)

    def weight_num(self, resource: str) -> int:
        """The resource's weight times `weight_den`."""
        for name, num in self.weight_nums:
            if name == resource:
                return num
        return self.weight_den


# -- durations -----------------------------------------------------------------------------
_UNITS_NS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}
_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> int:
    """A Go `time.ParseDuration` string ("168h", "5m", "1h30m", "1.5s", "-2m", "0") in
    nanoseconds; ValueError when Go would refuse it."""
    rest = text
    sign = 1
    if rest[:1] in ("+", "-"):
        sign = -1 if rest[0] == "-" else 1
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise ValueError(f'time: invalid duration "{text}"')
    total = Fraction(0)
    pos = 0
    while pos < len(rest):
        match = _DURATION.match(rest, pos)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f'time: invalid duration "{text}"')
        total += Fraction(match.group(1)) * _UNITS_NS[match.group(2)]
        pos = match.end()
    return sign * int(total)  # Go truncates a fraction of a nanosecond


def _duration_field(f: Fields, key: str, default: int) -> tuple[int, str]:
    raw = f.raw(key)
    if raw is None:
        return default, ""
    if not isinstance(raw, str):
        raise f.fail(key, f"expected a duration string, got {raw!r}")
    try:
        return parse_duration(raw), raw
    except ValueError as exc:
        raise f.fail(key, str(exc)) from None


def parse_admission_fair_sharing(obj: Fields) -> AdmissionFairSharing | None:
    """`admissionFairSharing`, defaulted and validated as Kueue's apis/config defaults.go and
    pkg/config/validation.go (`validateAdmissionFairSharing`) do."""
    afs = obj.opt_sub("admissionFairSharing")
    if afs is None:
        return None
    half_life, half_text = _duration_field(afs, "usageHalfLifeTime", 0)
    if half_life < 0:
        raise afs.fail("usageHalfLifeTime", f'Invalid value: "{half_text}": must be greater than or equal to 0')
    sampling, sampling_text = _duration_field(afs, "usageSamplingInterval", 0)
    if sampling == 0:
        sampling = DEFAULT_SAMPLING_NS
    if sampling < 0:
        raise afs.fail("usageSamplingInterval", f'Invalid value: "{sampling_text}": must be greater than 0')
    weights_raw = afs.sub("resourceWeights")
    weights: list[tuple[str, Fraction]] = []
    for name in sorted(weights_raw.data, key=str):
        value = weights_raw.raw(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise weights_raw.fail(str(name), f"expected a number, got {value!r}")
        weight = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
        if weight < 0:
            raise weights_raw.fail(str(name), "Invalid value: must be greater than or equal to 0")
        weights.append((str(name), weight))
    den = math.lcm(*(w.denominator for _, w in weights)) if weights else 1
    nums = tuple((name, int(w * den)) for name, w in weights)
    return AdmissionFairSharing(half_life, sampling, tuple(weights), _keep(sampling, half_life), den, nums)


_Q = 64  # fixed-point fraction bits of the decay factor
_ONE = 1 << _Q
_LN2 = int((Context(prec=60).ln(Decimal(2)) * _ONE).to_integral_value(rounding="ROUND_FLOOR"))
_STEPS = 4096  # 2 ** -(j / 4096), tabled: the series is then left with less than ln 2 / 4096


def _exp_neg(y: int) -> int:
    """exp(-y) in Q64 for y (Q64) in [0, ln 2), by its series, each step rounded down."""
    total = term = _ONE
    k = 1
    while term:
        term = (term * y >> _Q) // k
        total += term if k % 2 == 0 else -term
        k += 1
    return total


_TABLE = tuple(_exp_neg(j * _LN2 // _STEPS) for j in range(_STEPS))
_KEEP_CACHE: dict[tuple[int, int], tuple[int, int]] = {}


def _keep(elapsed_ns: int, half_life_ns: int) -> tuple[int, int]:
    """0.5 ** (elapsed / halfLife) as an exact ratio over 2**64, computed in integers only
    (the same bits on every machine; Kueue uses float64 `math.Pow`): 2 ** -n for the whole
    half-lives, a table for 256ths of one, and exp(-r ln 2) for the rest by its series, each
    step rounded down. A half-life of 0 keeps nothing."""
    if half_life_ns == 0:
        return (0, 1)
    if elapsed_ns <= 0:
        return (1, 1)
    key = (elapsed_ns, half_life_ns)
    found = _KEEP_CACHE.get(key)
    if found is not None:
        return found
    whole, rest = divmod(elapsed_ns, half_life_ns)
    if whole >= _Q:
        value = 0
    else:
        step, rest = divmod(rest * _STEPS, half_life_ns)
        y = rest * _LN2 // (half_life_ns * _STEPS)  # the rest of the fraction, times ln 2, in Q64
        value = (_TABLE[step] * _exp_neg(y) >> _Q) >> whole
    if len(_KEEP_CACHE) >= 4096:
        _KEEP_CACHE.clear()
    result = _KEEP_CACHE[key] = (value, _ONE)
    return result


def nanos(resource: str, amount: int) -> int:
    """A Kueue amount (milli-units for cpu, base units otherwise) in nano base units."""
    return amount * 10**6 if resource == "cpu" else amount * _NANO


# -- the ledger ----------------------------------------------------------------------------
@dataclass(slots=True)
class LedgerEntry:
    """One LocalQueue's `UsageLedgerEntry`, with the admitted usage it decays towards."""

    last_update: int  # µs (the log's time)
    consumed: dict[str, int] = field(default_factory=dict)  # nano base units, as of last_update
    # `consumed` when `admitted` last changed (or a penalty settled), and the samplings made since:
    # consumed is always computed from these in one step, so that folding the same samplings in
    # one go or in several (the engine at each event, a projection when read) gives the same nanos.
    base: dict[str, int] = field(default_factory=dict)
    base_ticks: int = 0
    pending: dict[str, int] = field(default_factory=dict)  # sum of `penalties`
    penalties: dict[str, dict[str, int]] = field(default_factory=dict)  # workload -> its penalty
    admitted: dict[str, int] = field(default_factory=dict)  # Kueue amounts, flavors summed
    # cached for `rank_weight`; dropped when anything above changes (derived: not compared)
    rank: Rank | None = field(default=None, compare=False)
    rank_weight: int = field(default=-1, compare=False)


class UsageLedger:
    """Every LocalQueue's entry, and when the next sampling is due (a heap, so that an event at
    which no sampling falls costs one comparison, not one per LocalQueue)."""

    __slots__ = ("entries", "counted", "due", "config")

    def __init__(self) -> None:
        self.entries: dict[LQKey, LedgerEntry] = {}
        # admitted workloads counted in an entry's `admitted`: workload -> (LocalQueue, usage)
        self.counted: dict[str, tuple[LQKey, dict[str, int]]] = {}
        self.due: list[tuple[int, LQKey]] = []
        self.config: AdmissionFairSharing | None = None

    # -- time --------------------------------------------------------------------------------
    def entry(self, lq: LQKey, now: int) -> LedgerEntry:
        e = self.entries.get(lq)
        if e is None:
            e = self.entries[lq] = LedgerEntry(now)
            self._schedule(lq, e)
        return e

    def _schedule(self, lq: LQKey, e: LedgerEntry) -> None:
        config = self.config
        if config is not None:
            heapq.heappush(self.due, (e.last_update + config.sampling_ns // 1000, lq))

    def sync(self, lq: LQKey, e: LedgerEntry, now: int) -> bool:
        """Make the samplings due by `now`; True if the history changed."""
        config = self.config
        if config is None:
            return False
        interval = config.sampling_ns // 1000 or 1
        ticks = (now - e.last_update) // interval
        if ticks <= 0:
            return False
        e.last_update += ticks * interval
        e.base_ticks += ticks
        self._schedule(lq, e)
        if config.half_life_ns == 0:
            changed = bool(e.consumed)
            e.consumed = {}
            e.base = {}
        else:
            out = self._decayed(e.base, e.admitted, _keep(e.base_ticks * interval * 1000, config.half_life_ns))
            changed = out != e.consumed
            e.consumed = out
        if changed:
            e.rank = None
        return changed

    @staticmethod
    def _decayed(consumed: dict[str, int], admitted: dict[str, int], keep: tuple[int, int]) -> dict[str, int]:
        """consumed * keep + admitted * (1 - keep), each product rounded down to a nano."""
        if not consumed and not admitted:
            return {}
        num, den = keep
        out: dict[str, int] = {}
        for res, value in consumed.items():
            out[res] = value * num // den
        for res, held in admitted.items():
            if held:
                out[res] = out.get(res, 0) + nanos(res, held) * (den - num) // den
        return out

    @staticmethod
    def _rebase(e: LedgerEntry) -> None:
        """What the history decays from changes (the admitted usage, a settled penalty)."""
        e.base = dict(e.consumed)
        e.base_ticks = 0

    def advance(self, now: int) -> list[LQKey]:
        """The samplings due by `now` across all LocalQueues; the LocalQueues whose usage changed."""
        changed: list[LQKey] = []
        due = self.due
        while due and due[0][0] <= now:
            _, lq = heapq.heappop(due)
            e = self.entries.get(lq)
            if e is None:
                continue
            config = self.config
            if config is None or e.last_update + config.sampling_ns // 1000 > now:
                continue  # stale: the entry was updated since this was scheduled
            if self.sync(lq, e, now):
                changed.append(lq)
        return changed

    # -- workloads ---------------------------------------------------------------------------
    def push_penalty(self, lq: LQKey, workload: str, usage: dict[str, int], now: int) -> None:
        """`PushPenalty`: requests * (1 - keep of one interval), replacing the workload's own."""
        config = self.config
        if config is None:
            return
        e = self.entry(lq, now)
        self.sync(lq, e, now)
        self._drop_penalty(e, workload)
        num, den = config.tick_keep
        penalty = {res: nanos(res, amount) * (den - num) // den for res, amount in usage.items()}
        e.penalties[workload] = penalty
        for res, value in penalty.items():
            e.pending[res] = e.pending.get(res, 0) + value
        e.rank = None

    def drop_penalty(self, lq: LQKey, workload: str) -> None:
        """`SubPenalty`: the workload will never settle it."""
        e = self.entries.get(lq)
        if e is not None and e.penalties and self._drop_penalty(e, workload):
            e.rank = None

    @staticmethod
    def _drop_penalty(e: LedgerEntry, workload: str) -> dict[str, int] | None:
        penalty = e.penalties.pop(workload, None)
        if penalty is None:
            return None
        for res, value in penalty.items():
            left = e.pending.get(res, 0) - value
            if left:
                e.pending[res] = left
            else:
                e.pending.pop(res, None)
        return penalty

    def admitted(self, lq: LQKey, workload: str, usage: dict[str, int], now: int, settle: bool) -> None:
        """The workload is admitted with `usage` (by resource): it counts in the LocalQueue's
        admitted usage; with `settle` (a ClusterQueue with admission fair sharing), its penalty
        settles as Kueue's `updateAfsConsumedUsage` does."""
        if self.config is None:
            return
        e = self.entry(lq, now)
        self.sync(lq, e, now)
        self._count(e, lq, workload, usage)
        if settle:
            config = self.config
            elapsed = now - e.last_update
            if config.half_life_ns != 0 and elapsed > 0:
                e.consumed = self._decayed(e.consumed, e.admitted, _keep(elapsed * 1000, config.half_life_ns))
            penalty = self._drop_penalty(e, workload) if e.penalties else None
            if penalty:
                for res, value in penalty.items():
                    e.consumed[res] = e.consumed.get(res, 0) + value
            if elapsed:
                e.last_update = now
                self._schedule(lq, e)
        self._rebase(e)
        e.rank = None

    def admitted_at_once(self, lq: LQKey, workload: str, usage: dict[str, int], now: int) -> None:
        """`push_penalty` then `admitted(settle=True)` at the same time, in one step: the penalty
        goes straight into `consumed` (a speed-up, the same entry: the pushed penalty would be
        popped again at once, and the second sync has nothing to make)."""
        config = self.config
        if config is None:
            return
        e = self.entry(lq, now)
        self.sync(lq, e, now)
        if e.penalties:
            self._drop_penalty(e, workload)  # an earlier penalty of its own, which the push replaces
        self._count(e, lq, workload, usage)
        elapsed = now - e.last_update
        if config.half_life_ns != 0 and elapsed > 0:
            e.consumed = self._decayed(e.consumed, e.admitted, _keep(elapsed * 1000, config.half_life_ns))
        num, den = config.tick_keep
        consumed = e.consumed
        for res, amount in usage.items():
            consumed[res] = consumed.get(res, 0) + nanos(res, amount) * (den - num) // den
        if elapsed:
            e.last_update = now
            self._schedule(lq, e)
        self._rebase(e)
        e.rank = None

    def _count(self, e: LedgerEntry, lq: LQKey, workload: str, usage: dict[str, int]) -> None:
        if workload in self.counted:
            return
        self.counted[workload] = (lq, usage)
        for res, amount in usage.items():
            e.admitted[res] = e.admitted.get(res, 0) + amount

    def uncount(self, workload: str, now: int) -> None:
        """The workload is no longer admitted (evicted, or its quota released)."""
        counted = self.counted.pop(workload, None)
        if counted is None:
            return
        lq, usage = counted
        e = self.entries.get(lq)
        if e is None:
            return
        self.sync(lq, e, now)
        self._rebase(e)
        for res, amount in usage.items():
            left = e.admitted.get(res, 0) - amount
            if left:
                e.admitted[res] = left
            else:
                e.admitted.pop(res, None)

    def forget(self, lq: LQKey) -> None:
        """The LocalQueue is deleted: its history and penalties go with it (Kueue's ledger
        `Delete`); workloads still admitted from it stay counted nowhere."""
        if self.entries.pop(lq, None) is not None:
            for workload in [w for w, (q, _) in self.counted.items() if q == lq]:
                del self.counted[workload]

    # -- reading -----------------------------------------------------------------------------
    def rank(self, lq: LQKey, now: int, weight_milli: int) -> Rank:
        """The LocalQueue's usage as of its last sampling or change, for ordering: (1, 0) when
        its weight is 0 (Kueue: +Inf, last), else (0, usage). It makes no sampling itself: those
        are made before each admission cycle (`advance`), so an order read while an event is
        applied is the one its queue was last told about (`order_changed`)."""
        e = self.entries.get(lq)
        if e is None:
            e = self.entry(lq, now)
        if e.rank is not None and e.rank_weight == weight_milli:
            return e.rank
        rank = (1, 0.0) if weight_milli <= 0 else (0, self._weighted(e, weight_milli))
        e.rank, e.rank_weight = rank, weight_milli
        return rank

    def _weighted(self, e: LedgerEntry, weight_milli: int) -> float:
        """(consumed + pending) weighted by resource, in base units, divided by the LocalQueue's
        weight: an integer sum divided once (Python's int division is correctly rounded, so the
        float is the same on every machine)."""
        config = self.config
        total = 0
        for res, amount in e.consumed.items():
            total += (config.weight_num(res) if config is not None else 1) * amount
        for res, amount in e.pending.items():
            total += (config.weight_num(res) if config is not None else 1) * amount
        den = config.weight_den if config is not None else 1
        return total * 1000 / (den * _NANO * weight_milli)

    def usage_value(self, lq: LQKey, now: int, weight_milli: int) -> float:
        """What `kueue_local_queue_admission_fair_sharing_usage` reports (+Inf for weight 0)."""
        e = self.entries.get(lq)
        if e is not None:
            self.sync(lq, e, now)
        inf, value = self.rank(lq, now, weight_milli)
        return float("inf") if inf else value

    def set_config(self, config: AdmissionFairSharing | None, now: int) -> None:
        """A new Configuration. The history is kept (Kueue persists it in the LocalQueue's status
        across the restart a configuration change needs); the next samplings follow the new
        interval, from each entry's last update."""
        if config == self.config:
            return
        self.config = config
        self.due = []
        for lq, e in self.entries.items():
            e.rank = None
            self._rebase(e)
            self._schedule(lq, e)

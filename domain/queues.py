"""A ClusterQueue's pending workloads: Kueue's ordering and its two queueing strategies.

Order: higher priority first, then earlier queue-order time, then position in the input log.

BestEffortFIFO parks a head that cannot be admitted and moves on. Kueue parks workloads one by
one and, with scheduling-equivalence hashing, parks every workload with the same shape at once;
here pending workloads are grouped into equivalence classes (namespace, priority, pod-set shape)
from the start, so parking, and unparking on a cohort change, cost one step per class instead of
one per workload. That is what keeps an event's cost independent of the pending backlog. A
queue names each class it holds by a small int (`ids`): the class itself is a nested tuple,
which Python hashes anew at every dict lookup, and classes are looked up on every head tried.

StrictFIFO does not park: a head that cannot be admitted blocks the queue until something that
could change the answer happens (`requeue_all`). The one exception, as in Kueue, is a head whose
namespace the ClusterQueue does not select: it is parked (with its class) and does not block.

With admission fair sharing (`fair`: domain/admission_fair_sharing.py) the order starts with the
usage of each workload's LocalQueue, lowest first, which moves with time and admissions: classes
are per LocalQueue, and the head is chosen among each LocalQueue's first, by (usage, OrderKey).
That costs a step per LocalQueue (StrictFIFO) or per ready class (BestEffortFIFO) per head.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Hashable, Iterator
from heapq import merge
from typing import Any, Protocol, cast

from sortedcontainers import SortedList

from domain.shared_values import shared_status

# (-priority, queue time, log position, namespace/name) and (reason, message). Variable-length in
# the annotations on purpose, as quota.FR: under mypyc a fixed-length tuple is a C struct, boxed
# into a new tuple (and new ints) wherever it is stored, so a workload's queue would hold a copy
# of the key its state holds, and every workload a copy of its class's shared status. Typed so,
# they stay one object each: a pending workload's share of a deep backlog.
OrderKey = tuple[int | str, ...]
Status = tuple[str, ...]
LQKey = tuple[str, str]  # (namespace, name)


class Ranks(Protocol):
    """Each LocalQueue's admission-fair-sharing usage, comparable (lower first)."""

    def rank(self, lq: LQKey) -> Any: ...


class PendingQueue:
    __slots__ = (
        "strict", "members", "classes", "class_of", "ready", "parked", "blocker",
        "generic", "waiting_for", "thresholds", "serial", "ids", "next_id",
        "fair", "lq_of", "by_lq", "lq_classes",
    )

    def __init__(self, strict: bool, fair: Ranks | None = None) -> None:
        self.strict = strict
        # Admission fair sharing: the equivalence classes pushed carry their LocalQueue (the
        # namespace first, the LocalQueue's name last: lifecycle.equivalence_class).
        self.fair = fair
        self.lq_of: dict[int, LQKey] = {}  # class id -> its LocalQueue (fair only)
        self.by_lq: dict[LQKey, Any] = {}  # StrictFIFO, fair only: LocalQueue -> its SortedList
        self.lq_classes: dict[LQKey, int] = {}  # fair only: LocalQueue -> how many classes it has
        # StrictFIFO: every pending OrderKey, sorted, for its heads. BestEffortFIFO does not keep
        # it (its heads come from `ready`): keys() merges the classes when asked, which only
        # configuration changes and views do, so no submission or admission pays for it.
        self.members: Any = SortedList()
        self.classes: dict[int, Members] = {}  # class id -> its members
        # workload key -> its class's members, which name the class id: the one object each
        # class already has (under mypyc an int id stored per workload is a new int object)
        self.class_of: dict[str, Members] = {}
        # class -> its id while it has members here (its Members name the class back); ids
        # are never reused.
        self.ids: dict[Hashable, int] = {}
        self.next_id = 0
        # (head OrderKey, class) of classes worth trying, sorted. A plain list kept with bisect:
        # it holds one entry per class (not per workload), and is read and changed for every
        # head tried, where SortedList's Python-level methods cost more than the list's C ones.
        self.ready: list[tuple[OrderKey, int]] = []
        self.parked: dict[int, Status] = {}  # class -> why its head failed
        # StrictFIFO: the head that failed and holds the queue. Kueue requeues it at once and
        # tries it again every cycle; here the queue sleeps until something could change the
        # answer: a release (requeue_all), the head leaving, a workload that sorts before it, or
        # an admission in its cohort when it may reclaim there (unblock).
        self.blocker: OrderKey | None = None
        # BestEffortFIFO parked classes are of two kinds. Most wait for "something to change" and
        # wake on any release in the cohort (`generic`). A class whose head asks, for some pod
        # set, more of a resource than any flavor has available waits for that resource only:
        # it is filed under (resource, amount) and wakes only when a release makes that much
        # available in some flavor. This is what keeps a finish cheap under a large backlog.
        self.generic: dict[int, None] = {}
        self.waiting_for: dict[int, tuple[str, int, int]] = {}  # class -> (resource, amount, serial)
        # resource -> [(amount, serial, class)], sorted: a plain list kept with bisect, as `ready`
        # (one entry per filed class, and each is read and changed on a per-release path).
        self.thresholds: dict[str, list[tuple[int, int, int]]] = {}
        self.serial = 0

    def __len__(self) -> int:
        return len(self.class_of)

    def __contains__(self, wl_key: str) -> bool:
        return wl_key in self.class_of

    def keys(self) -> Iterator[OrderKey]:
        """Every pending OrderKey, in queue order."""
        if self.fair is not None:
            ranks = self.fair
            return iter(sorted(self.members if self.strict else merge(*self.classes.values()),
                               key=lambda k: (ranks.rank(self._lq(k)), k)))
        if self.strict:
            return iter(self.members)
        return merge(*self.classes.values())  # keys are unique: no ties to break

    def position(self, key: OrderKey) -> int:
        if self.strict and self.fair is None:
            return int(self.members.index(key))
        return list(self.keys()).index(key)

    # -- membership -----------------------------------------------------------------------
    def push(self, key: OrderKey, equivalence: Hashable) -> Status | None:
        """Add a workload of this equivalence class; returns the parked status of its class if
        it joins a parked class."""
        if self.strict:
            self.members.add(key)
        wl = cast(str, key[3])
        cls = self.ids.get(equivalence)
        if cls is None:
            cls = self.ids[equivalence] = self.next_id
            self.next_id += 1
            members = self.classes[cls] = Members(equivalence, cls)
            if self.fair is not None:
                eq: tuple[Any, ...] = equivalence  # type: ignore[assignment]
                lq_key = self.lq_of[cls] = (eq[0], eq[-1])
                self.lq_classes[lq_key] = self.lq_classes.get(lq_key, 0) + 1
        else:
            members = self.classes[cls]
        self.class_of[wl] = members
        old_head = members.first() if members.items else None
        members.add(key)
        parked = self.parked.get(cls)
        if self.strict:
            if self.fair is not None:
                lq = self.lq_of[cls]
                listed = self.by_lq.get(lq)
                if listed is None:
                    listed = self.by_lq[lq] = SortedList()
                listed.add(key)
                if self.blocker is not None and self._fair_key(key) < self._fair_key(self.blocker):
                    self.blocker = None
                return parked
            if self.blocker is not None and key < self.blocker:
                self.blocker = None  # a new head, tried before the one that failed
            return parked
        if parked is not None:
            return parked
        if old_head is None:
            _insort(self.ready, (key, cls))
        elif key < old_head:
            _remove(self.ready, (old_head, cls))
            _insort(self.ready, (key, cls))
        return None

    @property
    def blocked(self) -> bool:
        return self.blocker is not None

    def unblock(self) -> bool:
        """StrictFIFO: let the head that holds the queue be tried again (and only it: classes
        parked for a namespace mismatch stay parked). Returns whether there is a head to try."""
        if self.blocker is None:
            return False
        self.blocker = None
        return bool(self.members)

    def restore_blocked(self) -> None:
        """Re-establish a blocked StrictFIFO queue from a snapshot: its head is the blocker."""
        self.blocker = self._strict_head()

    def remove(self, key: OrderKey) -> None:
        if key == self.blocker:
            self.blocker = None  # the next workload gets its turn
        wl = cast(str, key[3])
        members = self.class_of.pop(wl)
        cls = members.cls
        if self.strict:
            self.members.remove(key)
            if self.fair is not None:
                lq = self.lq_of[cls]
                listed = self.by_lq[lq]
                listed.remove(key)
                if not listed:
                    del self.by_lq[lq]
        was_ready_head = not self.strict and members.first() == key and cls not in self.parked
        members.remove(key)
        if not members.items:
            del self.classes[cls]
            del self.ids[members.equivalence]
            gone = self.lq_of.pop(cls, None)
            if gone is not None:
                left = self.lq_classes[gone] - 1
                if left:
                    self.lq_classes[gone] = left
                else:
                    del self.lq_classes[gone]
            self._unfile(cls)
        if not was_ready_head:
            return
        _remove(self.ready, (key, cls))
        if members.items:
            _insort(self.ready, (members.first(), cls))

    # -- scheduling -----------------------------------------------------------------------
    def head(self) -> OrderKey | None:
        if self.strict:
            return None if self.blocker is not None else self._strict_head()
        if not self.ready:
            return None
        if self.fair is not None:
            return self._fair_ready_head()
        return self.ready[0][0]

    # -- admission fair sharing ----------------------------------------------------------
    def _lq(self, key: OrderKey) -> LQKey:
        return self.lq_of[self.class_of[cast(str, key[3])].cls]

    def _fair_key(self, key: OrderKey) -> tuple[Any, OrderKey]:
        assert self.fair is not None
        return (self.fair.rank(self._lq(key)), key)

    def _fair_ready_head(self) -> OrderKey | None:
        """The first ready class head of each LocalQueue, the least used LocalQueue's first."""
        assert self.fair is not None
        ranks = self.fair
        lq_of = self.lq_of
        every = len(self.lq_classes)
        if every == 1:
            return self.ready[0][0] if self.ready else None  # one LocalQueue: its order is the order
        best: tuple[Any, OrderKey] | None = None
        seen: dict[LQKey, None] = {}
        for key, cls in self.ready:
            lq = lq_of[cls]
            if lq in seen:
                continue  # ready is sorted: this LocalQueue's first came before
            seen[lq] = None
            candidate = (ranks.rank(lq), key)
            if best is None or candidate < best:
                best = candidate
            if len(seen) == every:
                break  # every LocalQueue's first is seen: the rest come after them
        return None if best is None else best[1]

    def _fair_strict_head(self) -> OrderKey | None:
        assert self.fair is not None
        best: tuple[Any, OrderKey] | None = None
        parked = self.parked
        class_of = self.class_of
        for lq, listed in self.by_lq.items():
            for key in listed:
                if class_of[cast(str, key[3])].cls not in parked:
                    candidate = (self.fair.rank(lq), key)
                    if best is None or candidate < best:
                        best = candidate
                    break
        return None if best is None else best[1]

    def fair_order_changed(self) -> bool:
        """A LocalQueue's usage changed: a StrictFIFO head that failed no longer holds the queue
        if another workload now sorts first (Kueue rebuilds its heap and tries that one);
        True if the queue has a head to try again."""
        if self.fair is None or not self.strict or self.blocker is None:
            return False
        if self._fair_strict_head() == self.blocker:
            return False
        self.blocker = None
        return self._strict_head() is not None

    def _strict_head(self) -> OrderKey | None:
        if self.fair is not None:
            return self._fair_strict_head()
        for key in self.members:
            if self.class_of[cast(str, key[3])].cls not in self.parked:
                return key  # type: ignore[no-any-return]
        return None

    def park(self, key: OrderKey, status: Status, blocks: bool = True,
             needs: tuple[str, int] | None = None) -> None:
        """This workload (a head) could not be admitted, and nothing will change that until
        `requeue_all` (or, for a class filed with `needs`, until `wake_released` offers that
        much). In StrictFIFO a parked head blocks the queue unless `blocks` is false."""
        members = self.class_of[cast(str, key[3])]
        cls = members.cls
        if self.strict and blocks:
            self.blocker = key
            return
        if cls in self.parked:
            return
        if not self.strict:
            _remove(self.ready, (members.first(), cls))
        self._set_parked(cls, status, needs)

    def _set_parked(self, cls: int, status: Status, needs: tuple[str, int] | None) -> None:
        """Record a class (already out of `ready`) as parked: generic, or filed by resource."""
        self.parked[cls] = shared_status(status)  # the one its workloads hold (set_pending)
        if needs is None or self.strict:
            self.generic[cls] = None
            return
        resource, amount = needs
        self.serial += 1
        self.waiting_for[cls] = (resource, amount, self.serial)
        index = self.thresholds.get(resource)
        if index is None:
            index = self.thresholds[resource] = []
        _insort(index, (amount, self.serial, cls))

    def park_ready(self, filings: list[tuple[int, Status, tuple[str, int] | None]]) -> None:
        """BestEffortFIFO: park the first ready classes at once, each filed by the (resource,
        amount) it waits for (None: generic): what `park` of each head in turn leaves (each
        index sorted as insort keeps it). `filings` names the first len(filings) ready classes,
        in their order."""
        ready = self.ready
        n = len(filings)
        assert not self.strict and n <= len(ready)
        if n == len(ready):
            ready.clear()
        else:
            del ready[:n]
        parked, waiting_for, thresholds = self.parked, self.waiting_for, self.thresholds
        serial = self.serial
        touched: dict[str, list[tuple[int, int, int]]] = {}
        generic = self.generic
        for cls, status, needs in filings:
            parked[cls] = status
            if needs is None:
                generic[cls] = None
                continue
            resource, amount = needs
            serial += 1
            waiting_for[cls] = (resource, amount, serial)
            index = touched.get(resource)
            if index is None:
                index = thresholds.get(resource)
                if index is None:
                    index = thresholds[resource] = []
                touched[resource] = index
            index.append((amount, serial, cls))
        self.serial = serial
        for index in touched.values():
            index.sort()

    def candidate_admitted(self, priority: int) -> None:
        """A workload of this priority now holds quota in this (preemptive) queue: the classes
        filed by resource whose heads it may yield to as a preemption candidate (priority at
        most theirs, whatever the policy) wait for any change again, as before they were filed
        (`Scheduler._still_hopeless`)."""
        for cls in [c for c in self.waiting_for if -cast(int, self.classes[c].first()[0]) >= priority]:
            self._drop_filing(cls)
            self.generic[cls] = None

    def _unfile(self, cls: int) -> None:
        self.parked.pop(cls, None)
        self.generic.pop(cls, None)
        self._drop_filing(cls)

    def _drop_filing(self, cls: int) -> None:
        """Take a class out of the by-resource index, if it is filed there."""
        filed = self.waiting_for.pop(cls, None)
        if filed is not None:
            resource, amount, serial = filed
            index = self.thresholds[resource]
            _remove(index, (amount, serial, cls))
            if not index:
                # An empty index left behind would make every release compute availability
                # for this queue (wake_after_release skips queues with nothing filed).
                del self.thresholds[resource]

    def _wake(self, cls: int) -> None:
        self._unfile(cls)
        _insort(self.ready, (self.classes[cls].first(), cls))

    def wake_released(self, available: dict[str, int]) -> bool:
        """Quota was released: wake the classes that waited for any change, and those filed
        under a resource of which at least their amount is now available."""
        if self.strict:
            return self.requeue_all()
        generic = self.generic
        woke = bool(generic)
        ready = self.ready
        arrived = len(ready)  # the classes woken are appended, then sorted in once
        if generic:
            # _wake for each; a generic class is filed nowhere else.
            parked, classes = self.parked, self.classes
            for cls in generic:
                del parked[cls]
                ready.append((classes[cls].first(), cls))
            generic.clear()
        for resource, amount in available.items():
            index = self.thresholds.get(resource)
            if not index or index[0][0] > amount:
                continue
            # _wake for each class filed at most `amount`, in the same order: they are the front
            # of the sorted index, so they leave it at once instead of one bisect each.
            n = bisect_left(index, (amount + 1,))
            woken = index[:n]
            del index[:n]
            if not index:
                del self.thresholds[resource]
            parked, generic, waiting_for, classes = self.parked, self.generic, self.waiting_for, self.classes
            for _, _, cls in woken:  # _unfile's pops, then _wake's insort
                parked.pop(cls, None)
                generic.pop(cls, None)
                waiting_for.pop(cls, None)
                ready.append((classes[cls].first(), cls))
            woke = True
        if len(ready) != arrived:
            # What insort of each leaves: the same sorted list (its items are distinct).
            if arrived == 0 or len(ready) - arrived > 8:
                ready.sort()
            else:
                woken_now = ready[arrived:]
                del ready[arrived:]
                for item in woken_now:
                    insort(ready, item)
        return woke

    def is_parked(self, wl_key: str) -> bool:
        members = self.class_of.get(wl_key)
        return members is not None and members.cls in self.parked

    def requeue_all(self) -> bool:
        """Something that could change the answer happened; returns whether anything woke up."""
        if self.strict:
            woke = (self.blocker is not None or bool(self.parked)) and bool(self.members)
            self.blocker = None
            self.parked.clear()
            self.generic.clear()
            return woke
        if not self.parked:
            return False
        for cls in self.parked:
            _insort(self.ready, (self.classes[cls].first(), cls))
        self.parked.clear()
        self.generic.clear()
        self.waiting_for.clear()
        self.thresholds.clear()
        return True

    def restore_parked(self, cls: int, status: Status, needs: tuple[str, int] | None = None) -> None:
        """Re-establish a parked class (by id) when restoring a snapshot, filed as it was:
        generic, or under the resource and amount it waits for (`filing`). Restored generic, a
        class filed by resource would wake on a release where the original sleeps, and the next
        class of its queue would head it a cycle later than in the original."""
        if not self.strict:
            head = self.classes[cls].first()
            if (head, cls) in self.ready:
                self.ready.remove((head, cls))
        self._set_parked(cls, status, needs)

    def filing(self, cls: int) -> tuple[str, int] | None:
        """What a parked class waits for, if it is filed by resource (None: generic)."""
        filed = self.waiting_for.get(cls)
        return None if filed is None else (filed[0], filed[1])

    def is_ready(self) -> bool:
        return self.head() is not None

    def class_id(self, wl_key: str) -> int:
        """The id of the class a pending workload belongs to here."""
        return self.class_of[wl_key].cls

    def parked_status(self, wl_key: str) -> Status | None:
        members = self.class_of.get(wl_key)
        if members is None:
            return None
        return self.parked.get(members.cls)


_insort = insort


class Members:
    """The pending OrderKeys of one class, sorted: a list read from `start`. Heads leave from
    the front, where only `start` moves, and arrivals usually join at the back, so neither
    shifts the list (a SortedList costs Python-level calls on every read of its head); the
    dead front is dropped once it is most of the list."""

    __slots__ = ("items", "start", "equivalence", "cls")

    def __init__(self, equivalence: Hashable = None, cls: int = -1) -> None:
        self.items: list[OrderKey] = []
        self.start = 0
        self.equivalence = equivalence  # the class these are the members of
        self.cls = cls  # its id in its queue

    def __len__(self) -> int:
        return len(self.items) - self.start

    def __iter__(self) -> Iterator[OrderKey]:
        return iter(self.items[self.start:])

    def first(self) -> OrderKey:
        return self.items[self.start]

    def add(self, key: OrderKey) -> None:
        items, start = self.items, self.start
        if start and key < items[start]:
            start -= 1
            items[start] = key  # a new head (a requeued workload): into the dead front
            self.start = start
            return
        insort(items, key, start)

    def remove(self, key: OrderKey) -> None:
        items, start = self.items, self.start
        i = bisect_left(items, key, start)
        if i == len(items) or items[i] != key:
            raise ValueError(f"{key!r} not in class")
        if i != start:
            del items[i]
            return
        start += 1
        if start == len(items):
            items.clear()
            start = 0
        elif start > 64 and start * 2 > len(items):
            del items[:start]
            start = 0
        self.start = start


def _remove(items: list[Any], item: Any) -> None:
    """Remove `item` from the sorted list `items` (ValueError if absent, as SortedList)."""
    i = bisect_left(items, item)
    if i == len(items) or items[i] != item:
        raise ValueError(f"{item!r} not in list")
    del items[i]

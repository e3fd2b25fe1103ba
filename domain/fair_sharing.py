"""Fair sharing: Kueue's dominant resource share (DRS).

A node's DRS is how much it borrows of its dominant resource, relative to what its parent could
lend, divided by its weight. Kueue computes it in float64; here every ratio is an exact
`Fraction`, so ties are ties on every machine.

Both users of the shares sit above this module: admission order (Kueue's fairSharingIterator) is
domain/fair_sharing_admission.py, fair-sharing preemption is
domain/preemption/fair_sharing_strategies.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from domain.quota import FR, QuotaNode

_ZERO = Fraction(0)


@dataclass(frozen=True, slots=True)
class DRS:
    # The unweighted ratio num/den: 1000 × borrowed / lendable, of the dominant resource. Kept
    # as two integers (not reduced) so that shares are compared by cross-multiplying, exactly,
    # without building Fractions on the scheduling path.
    num: int
    den: int  # > 0
    weight: int  # milli-units
    dominant: str = ""
    borrowed: tuple[FR, ...] = ()

    @property
    def ratio(self) -> Fraction:
        return Fraction(self.num, self.den)

    @property
    def borrowing(self) -> bool:
        return bool(self.borrowed)

    def borrowing_on(self, requested: dict[FR, int]) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)

    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.num != 0

    def share(self) -> Fraction | None:
        """The weighted share; None stands for +infinity (weight 0 while borrowing)."""
        if self.num == 0:
            return _ZERO
        if self.weight == 0:
            return None
        return Fraction(self.num * 1000, self.den * self.weight)

    def weighted_share(self) -> int:
        """Kueue's status.fairSharing.weightedShare: the share rounded up (MaxInt64 for +inf)."""
        share = self.share()
        if share is None:
            return 2**63 - 1
        return -((-share.numerator) // share.denominator)


NEGATIVE = DRS(-1, 1, 1000)


def compare(a: DRS, b: DRS) -> int:
    """Order two shares; +infinity (weight 0 while borrowing) above every finite share. Exact:
    the weighted shares num·1000/(den·weight) are compared by cross-multiplying."""
    an, bn = a.num, b.num
    a_inf = a.weight == 0 and an != 0
    b_inf = b.weight == 0 and bn != 0
    if a_inf and b_inf:
        left, right = an * b.den, bn * a.den
    elif a_inf:
        return 1
    elif b_inf:
        return -1
    elif not an or not bn:
        # A zero share is zero whatever the weight; the other's sign decides.
        return ((an > 0) - (an < 0)) - ((bn > 0) - (bn < 0))
    else:
        left, right = an * b.den * b.weight, bn * a.den * a.weight  # both weights positive here
    return (left > right) - (left < right)


Lendable = dict[int, dict[str, int]]  # id(parent) -> resource -> what the parent could lend


def _lendable(parent: QuotaNode, cache: Lendable | None) -> dict[str, int]:
    """What `parent` could lend, per resource, if the whole tree were idle: it depends on the
    configuration only, so a cycle computes it once per cohort."""
    if cache is not None:
        known = cache.get(id(parent))
        if known is not None:
            return known
    lendable: dict[str, int] = {}
    for fr in parent.root().subtree:
        lendable[fr[1]] = lendable.get(fr[1], 0) + parent.potential_available(fr)
    if cache is not None:
        cache[id(parent)] = lendable
    return lendable


def dominant_resource_share(node: QuotaNode, cache: Lendable | None = None,
                            extra: dict[FR, int] | None = None) -> DRS:
    """`cache` may carry what parents could lend between calls that see the same configuration;
    `extra` is usage to count as if it were added to the node's (see `usage_seen_above`)."""
    parent = node.parent
    if parent is None:
        return DRS(0, 1, node.weight)
    borrowed_by_resource: dict[str, int] = {}
    borrowed: list[FR] = []
    usage = node.usage
    for fr, quota in node.subtree.items():
        amount = usage.get(fr, 0) - quota
        if extra:
            amount += extra.get(fr, 0)
        if amount > 0:
            borrowed_by_resource[fr[1]] = borrowed_by_resource.get(fr[1], 0) + amount
            borrowed.append(fr)
    if not borrowed:
        return DRS(0, 1, node.weight)
    lendable = _lendable(parent, cache)
    # The largest borrowed/lendable, first in resource-name order on ties; compared as integer
    # cross-products, one Fraction built for the winner.
    best_num, best_den = 0, 1
    dominant = ""
    for resource in sorted(borrowed_by_resource):
        total = lendable.get(resource, 0)
        if total > 0:
            num = borrowed_by_resource[resource] * 1000
            if num * best_den > best_num * total:
                best_num, best_den, dominant = num, total, resource
    if not best_num:
        return DRS(0, 1, node.weight, "", tuple(sorted(borrowed)))
    return DRS(best_num, best_den, node.weight, dominant, tuple(sorted(borrowed)))


def usage_seen_above(node: QuotaNode, usage: dict[FR, int]) -> dict[FR, int]:
    """What `node`'s parent would add to its usage if `usage` were added to `node`'s (as
    QuotaNode.add_usage propagates it: the part within the node's localQuota stays below)."""
    out: dict[FR, int] = {}
    for fr, delta in usage.items():
        local = node.local_quota(fr)
        before = node.usage.get(fr, 0)
        seen = max(0, before + delta - local) - max(0, before - local)
        if seen:
            out[fr] = seen
    return out

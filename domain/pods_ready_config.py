"""The Configuration's `waitForPodsReady`, defaulted and validated as Kueue does.

Kueue's apis/config/v1beta1/defaults.go and v1beta2/defaults.go, pkg/config/validation.go
(`validateWaitForPodsReady`):

- v1beta1: off unless `enable: true`; then `timeout` defaults to 5m, `blockAdmission` to true
  (the value of `enable`).
- v1beta2: on whenever a Configuration is given, the stanza present or not (v1beta2 has no
  `enable`); `timeout` defaults to 30m, `blockAdmission` to false.
- Both: `recoveryTimeout` defaults to `timeout` (`0s` turns recovery checks off);
  `requeuingStrategy`: `timestamp` Eviction (or Creation), `backoffBaseSeconds` 60,
  `backoffMaxSeconds` 3600, `backoffLimitCount` unset (requeue for ever).
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.admission_fair_sharing import parse_duration
from domain.fields import Fields

EVICTION_TIMESTAMP = "Eviction"
CREATION_TIMESTAMP = "Creation"
V1BETA2_CONFIG = "config.kueue.x-k8s.io/v1beta2"

_V1BETA1_TIMEOUT_US = 5 * 60 * 1_000_000
_V1BETA2_TIMEOUT_US = 30 * 60 * 1_000_000
DEFAULT_BACKOFF_BASE_SECONDS = 60
DEFAULT_BACKOFF_MAX_SECONDS = 3600
_NEGATIVE = "must be greater than or equal to 0"


@dataclass(frozen=True, slots=True)
class PodsReadyConfig:
    timeout: int  # µs
    block_admission: bool
    recovery_timeout: int | None  # µs; None: recovery is not checked
    timestamp: str
    backoff_base_seconds: int
    backoff_max_seconds: int
    backoff_limit_count: int | None

    def backoff(self, count: int) -> int:
        """The wait before the `count`-th requeue (1, 2, ...), in µs: base * 2^(count-1), at most
        the maximum, as Kueue's UpdateRequeueState (pkg/workload/workload.go) with its
        pkg/util/wait Backoff. Kueue adds a random jitter of up to 0.01%; quotaflow adds none,
        so a replay waits exactly as long (CONTRACT.md, departures)."""
        base = self.backoff_base_seconds * 1_000_000
        cap = self.backoff_max_seconds * 1_000_000
        if cap == 0:
            cap = 1 << 62  # Kueue: an unset (zero) cap means no cap
        wait = base
        for _ in range(count - 1):
            if wait >= cap:
                break
            wait *= 2
        return min(wait, cap)


def parse_pods_ready(obj: Fields, api_version: str) -> PodsReadyConfig | None:
    """The Configuration's `waitForPodsReady` in force, None when it is off."""
    stanza = obj.opt_sub("waitForPodsReady")
    v1beta2 = api_version == V1BETA2_CONFIG
    if v1beta2:
        block_default = False
        timeout_default = _V1BETA2_TIMEOUT_US
        w = stanza if stanza is not None else obj.sub("waitForPodsReady")
    else:
        if stanza is None or not stanza.bool("enable", False):
            return None
        w = stanza
        block_default = True
        timeout_default = _V1BETA1_TIMEOUT_US
    timeout, timeout_text = _duration(w, "timeout")
    if timeout is None or timeout == 0:
        if timeout == 0 and not v1beta2 and w.has("timeout"):
            raise w.fail("timeout", "Required value: must be specified")
        timeout = timeout_default
    if timeout < 0:
        raise w.fail("timeout", f'Invalid value: "{timeout_text}": {_NEGATIVE}')
    recovery, recovery_text = _duration(w, "recoveryTimeout")
    if recovery is not None and recovery < 0:
        raise w.fail("recoveryTimeout", f'Invalid value: "{recovery_text}": {_NEGATIVE}')
    if recovery is None:
        recovery = timeout
    strategy = w.sub("requeuingStrategy")
    timestamp = strategy.enum("timestamp", (EVICTION_TIMESTAMP, CREATION_TIMESTAMP), EVICTION_TIMESTAMP)
    limit = strategy.opt_int("backoffLimitCount")
    base = strategy.opt_int("backoffBaseSeconds")
    cap = strategy.opt_int("backoffMaxSeconds")
    for name, value in (("backoffLimitCount", limit), ("backoffBaseSeconds", base), ("backoffMaxSeconds", cap)):
        if value is not None and value < 0:
            raise strategy.fail(name, f"Invalid value: {value}: {_NEGATIVE}")
    return PodsReadyConfig(
        timeout=timeout,
        block_admission=w.bool("blockAdmission", block_default),
        recovery_timeout=recovery if recovery > 0 else None,
        timestamp=timestamp,
        backoff_base_seconds=DEFAULT_BACKOFF_BASE_SECONDS if base is None else base,
        backoff_max_seconds=DEFAULT_BACKOFF_MAX_SECONDS if cap is None else cap,
        backoff_limit_count=limit,
    )


def _duration(f: Fields, key: str) -> tuple[int | None, str]:
    """A Go duration string in µs (truncated), None when absent."""
    raw = f.raw(key)
    if raw is None:
        return None, ""
    if not isinstance(raw, str):
        raise f.fail(key, f"expected a duration string, got {raw!r}")
    try:
        return parse_duration(raw) // 1000, raw
    except ValueError as exc:
        raise f.fail(key, str(exc)) from None

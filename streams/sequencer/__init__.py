"""The sequencer: from the admin topic and the tenant topics into the one input log.

In multi-topic mode producers do not write the input log; Kafka's ACLs let each write only its
own topic: batch administrators the admin topic (`quotaflow.admin`), each namespace's users its
tenant topic (`quotaflow.tenant.<namespace>`, one prefixed ACL per tenant). The sequencer, the
only writer of the input log, appends each record it reads there with the record's `source` set
in its envelope (`admin`, or `tenant:<namespace>`), overwriting any a producer put there; the
engine then holds each event to its source's rules (domain/authority.py). The input log stays
the single source of truth: `replay` and `audit` need nothing else.

Each step is exactly once: the records read, their appends to the input log and the consumer
group's new positions are one Kafka transaction. A sequencer killed mid-step leaves an open
transaction that its successor (the same transactional id) aborts; the successor reads from the
last committed positions, so nothing is lost or doubled.
"""

from streams.sequencer.loop import (
    ADMIN_TOPIC,
    TENANT_PREFIX,
    SequencerConfig,
    run_sequencer,
    sequenced,
    source_of,
)

__all__ = ["ADMIN_TOPIC", "TENANT_PREFIX", "SequencerConfig", "run_sequencer", "sequenced", "source_of"]

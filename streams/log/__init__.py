"""The logs quotaflow keeps (input, decisions, snapshots) and their two backends.

`interface` is the abstraction everything else is written against; `kafka` and `sqlite` keep
its contract; `envelope` is how events and decisions sit in records; `snapshots` how engine
snapshots are cut into records; `event_files` the files `replay` and `export` read.
The names most callers need are re-exported here.
"""

from streams.log.interface import (
    BrokerUrl,
    EventLog,
    Fenced,
    Headers,
    LogError,
    LogUnavailable,
    Message,
    Reader,
    Record,
    Topics,
    TopicSpec,
    Transaction,
    TransactionalWriter,
    open_log,
)

__all__ = [
    "BrokerUrl",
    "EventLog",
    "Fenced",
    "Headers",
    "LogError",
    "LogUnavailable",
    "Message",
    "Reader",
    "Record",
    "TopicSpec",
    "Topics",
    "Transaction",
    "TransactionalWriter",
    "open_log",
]

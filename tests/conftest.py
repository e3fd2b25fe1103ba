"""Project-wide fixtures. Keep this file thin: put fixture logic in helper
modules next to it and import the fixtures here."""

from kafka_fixtures import kafka_bootstrap, kafka_topic, kafka_topic_factory

__all__ = ["kafka_bootstrap", "kafka_topic", "kafka_topic_factory"]

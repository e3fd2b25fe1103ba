"""Project-wide fixtures. Keep this file thin: put fixture logic in helper
modules next to it and import the fixtures here."""

import os

from hypothesis import settings
from kafka_fixtures import kafka_bootstrap, kafka_topic, kafka_topic_factory

__all__ = ["kafka_bootstrap", "kafka_topic", "kafka_topic_factory"]

# CI replays the same examples on every run, so a red run is reproducible and a run lands or
# not on the code alone; local runs keep exploring new examples (and remember failures).
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

"""Developer tools that are not part of the installed product: a throwaway local Kafka broker for
tests and benchmarks, and a generated input stream."""

"""The admission agent: folds the input log through the engine into the decision log, exactly once.

- `loop`            the agent itself: recovery, fencing, one transaction per input event
- `process`         its process shell (a Faust app on Kafka, a mode worker on the embedded log)
- `engine_host`     where the engine runs: in-process or in a child process
- `engine_child`    that child process (`python -m streams.agent.engine_child`)
- `engine_wire`     what the agent and its engine process say to each other
- `structured_logs` structlog configuration: JSON lines on standard error
"""

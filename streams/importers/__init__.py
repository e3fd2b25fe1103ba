"""Other schedulers' configurations, converted to quotaflow's contract events (pure functions)."""

"""The `quotaflow` command line: `main` builds the app from the command modules.

- `log_commands`    commands that write or tail a log (apply, submit, finish, delete, watch, agent)
- `view_commands`   commands over the projections (status, pending, history, explain, audit, serve)
- `import_commands` `quotaflow import ...`
- `demo`            `quotaflow demo`
- `render`          everything shown to people (rich)
- `common`          what every command that opens a log shares
"""

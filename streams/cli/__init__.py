"""The `quotaflow` command line: `main` builds the app from the command modules.

- `log_commands`    commands that write or tail a log (apply, submit, finish, delete, watch, agent)
- `workload_commands` release, check
- `stop_commands`   stop, resume, set (from the object as the input log last set it)
- `list_commands`   `quotaflow list ...`
- `publishing`      a write command's one path: append, print, optionally wait
- `waiting`         `--wait`: the decisions of the written offsets, and the exit code
- `refs`            NS/NAME or NAME with -n
- `view_commands`   commands over the projections (status, pending, history, explain, audit, serve)
- `import_commands` `quotaflow import ...`
- `launch_command`  `quotaflow launch` (streams/launcher)
- `demo`            `quotaflow demo`
- `render`          everything shown to people (rich)
- `common`          what every command that opens a log shares
"""

"""`envsnap watch`: a capture of each watched host at start, every period, and on this
machine whenever a worker (a process matching a --proc pattern) starts, each handed to a
sink (the history store) with why it was made; the watcher's status file; its installation
as a systemd user service or a cron line. Nothing here prints: cli/watch.py says it all.

- period.py: "10m" <-> seconds;
- procstarts.py: the new processes of this machine, found cheaply (only pids not seen);
- status.py: what the watcher writes each cycle, read back by `watch --status`;
- run.py: the loop, its captures, its clock, how it stops;
- install.py: the systemd unit or the cron lines that keep a watcher running.
"""

"""What is done to a host, once: restore, bisect, explain and the playbook tasks all call it.

    shell.py      the handle every operation takes (Shell: a host and its connection)
    git.py        git on the host: reads, stash, checkout, fetch
    patch.py      a snapshot's uncommitted patch: checked, applied, taken back out
    files.py      plain files: read exactly, written atomically with a backup
    treefile.py   the write policy: files from a snapshot, written inside a trusted root
                  by treefile_host.py (run by the host's python), with a backup
    site.py       sitecustomize.py where the host's python reads it, through the policy
    locks.py      the lock on a checkout, with its holder
    pip.py        package versions pinned with the host's pip
    hostrule.py   the same-host rule (--force-host)

It stands above hosts and snapshot and imports nothing above them: a playbook task is a
thin adapter over these (check mode, diff, messages), never the other way round.
"""

"""What the tests share that is no test: real git histories, an sshd and a Slurm on
loopback, a browser, a toy server, recorded data and the paths to them. No test module
imports another test module; what two of them need lives here."""

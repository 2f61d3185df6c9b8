from envsnap.cli.main import console

console()

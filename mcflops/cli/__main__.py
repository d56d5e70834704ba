from mcflops.cli.main import entry

entry()

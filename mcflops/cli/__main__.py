import sys

from mcflops.cli.main import main

sys.exit(main())

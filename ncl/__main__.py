import sys

from ncl.cli import main

sys.exit(main())

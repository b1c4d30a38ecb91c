import sys

from hqval.cli import main

sys.exit(main())

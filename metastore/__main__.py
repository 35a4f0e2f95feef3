import sys

from metastore.cli import main

sys.exit(main())

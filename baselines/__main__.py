"""``python -m baselines`` is ``cluster-bench``."""
import sys

from baselines.cli import main

sys.exit(main())

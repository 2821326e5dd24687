"""`python -m mha_core`: see mha_core/cli/."""

import sys

from mha_core.cli import main

sys.exit(main())

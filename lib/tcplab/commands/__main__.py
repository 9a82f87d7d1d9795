"""``python -m tcplab.commands …``: the ``tcplab`` command without its script."""

import sys

from . import main

sys.exit(main())

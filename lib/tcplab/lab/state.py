"""Where tcplab keeps what it must find again after a crash.

/run is emptied at boot, exactly when the kernel forgets namespaces and changed sysctls
too, so nothing kept here can outlive what it describes.
"""

import os
from pathlib import Path

STATE_DIR = Path(os.environ.get("TCPLAB_STATE_DIR", "/run/tcplab"))
OWNERS_DIR = STATE_DIR / "owners"
WORK_DIR = STATE_DIR / "work"

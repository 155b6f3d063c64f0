"""The back-end tests sit in one folder per stage, as the package does; their shared
builders (`backend_helpers`) stay here, so this folder goes on their import path."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

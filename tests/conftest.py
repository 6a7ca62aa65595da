"""Modules directly in tests/ (shared_programs.py) are shared by several test folders: put tests/ on the
import path, as pytest does for each test file's own folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

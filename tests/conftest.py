import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # so tests can import book_helpers

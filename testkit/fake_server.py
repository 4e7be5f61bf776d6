"""``python -m testkit.fake_server``: the real server command, on the fake engine."""

from __future__ import annotations

import sys

from service.__main__ import main
from testkit.fake_engine import load_fake

if __name__ == "__main__":
    sys.exit(main(engine_loader=load_fake))

"""Names zync accepts for what it creates, checked where a spec names them and where a
pool is opened."""

from __future__ import annotations

import re

# A pool is a folder of the lake and a Delta table's name: letters, digits, _ and -.
POOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""``python3 -m inferlab.lab.server``: see the package docstring."""

import sys

from inferlab.lab.server.server import main

sys.exit(main())

# Copyright (c) 2026, inferlab developers (@inferlab)
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A stand-in for triton in the SGLang contract-test venv: parsing arguments only, never kernels.

sglang 0.5.23 imports triton unconditionally (sglang/srt/utils/common.py) and attaches a helper to it, but neither
parsing a command line nor resolving the speculative settings calls into it. The real package is about 1 GB of
GPU compiler. setup_venv.sh puts this directory on the venv's path with a .pth file; nothing else sees it.
"""

__version__ = "0.0.0+inferlab.stub"

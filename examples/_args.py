"""Shared command-line flag for the examples: ``--steps N`` runs a reduced version (CI uses it)."""
from __future__ import annotations

import argparse


def steps(default: int, description: str) -> int:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, default=default, help=f"training steps (default {default})")
    return parser.parse_args().steps

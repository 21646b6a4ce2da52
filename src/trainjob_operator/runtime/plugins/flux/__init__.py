"""Flux (KEP-2841): the plugin (`plugin.py`), its CURVE certificate (`curve.py`) and its two shell scripts
(`scripts/`, package data)."""

from .curve import curve_certificate, curve_keys, z85
from .plugin import Flux

__all__ = ["Flux", "curve_certificate", "curve_keys", "z85"]

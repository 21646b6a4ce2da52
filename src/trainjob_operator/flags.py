"""Command-line flags as kubectl treats them: a bad flag value is one line on stderr and exit 2, never a usage dump
or a traceback; the value types every subcommand shares."""

import argparse
import sys
from typing import NoReturn

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
"""The logging levels a flag or setting may name, in any case."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its errors said in one line (`PROG: error: ...; see PROG --help`) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}; see `{self.prog} --help`", file=sys.stderr)
        raise SystemExit(2)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1")
    return value


def port(text: str) -> int:
    """A TCP port to listen on: 1-65535."""
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (1-65535)")
    return value


def log_level(text: str) -> str:
    """A logging level, in any case (`debug`, `INFO`); the upper-case name logging takes."""
    if text.lower() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return text.upper()

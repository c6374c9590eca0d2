"""What every fleet-decode command line shares: bad input ends in one line naming it (exit 2),
and a reader that leaves early (`| head`) ends the output quietly, not in a traceback."""
import argparse
import functools
import os
import sys


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


def quiet_broken_pipe(main):
    """Wraps a CLI's main: output flushed before returning; a closed pipe exits 1 without a word."""

    @functools.wraps(main)
    def wrapped(*args, **kwargs):
        try:
            status = main(*args, **kwargs)
            sys.stdout.flush()
            return status
        except BrokenPipeError:
            # Python would flush stdout again at exit and complain; point it at /dev/null first.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1

    return wrapped

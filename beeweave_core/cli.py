"""The ``beeweave`` command line: look inside a memory, feed it, serve it.

``beeweave [--store PATH_OR_URL] [--tenant NAME] [--embedder NAME] COMMAND ...``

``--store`` is a SQLite file, a directory of tenant stores (with ``--tenant``), a
``postgresql://`` URL, or the ``http(s)://`` URL of a BeeWeave server (with ``--api-key``).
Errors print one line to stderr and exit non-zero; ``BEEWEAVE_DEBUG=1`` shows tracebacks. Output into
a pipe whose reader has gone (``beeweave search ... | head``) ends quietly with status 0.
The parser is :mod:`beeweave_core.cli_parser`; the commands are :mod:`beeweave_core.cli_commands`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from .cli_parser import COMMANDS, build_parser

__all__ = ["main", "build_parser", "COMMANDS"]

def _fail(message: str, code: int = 1) -> int:
    line = " ".join(str(message).split())  # one line, whatever the message held
    print(f"beeweave: error: {line}", file=sys.stderr)
    return code


def _mute_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it again at exit does not fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file descriptor (captured in-process): nothing to flush
        pass


def main(argv: Sequence[str] | None = None) -> int:
    from .errors import BeeWeaveError

    try:
        args = build_parser().parse_args(argv)
    except BeeWeaveError as exc:  # a $BEEWEAVE_* switch that is neither true nor false
        return _fail(str(exc), 2)
    from . import cli_commands

    debug = os.environ.get("BEEWEAVE_DEBUG") not in (None, "", "0")
    try:
        code = int(getattr(cli_commands, "cmd_" + args.command.replace("-", "_"))(args) or 0)
        sys.stdout.flush()  # here, not at exit: a reader that went away is handled below
        return code
    except BrokenPipeError:  # `beeweave search ... | head`: the reader has what it wanted
        _mute_stdout()
        return 0
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BeeWeaveError as exc:
        if debug:
            raise
        return _fail(str(exc) or type(exc).__name__)
    except OSError as exc:
        if debug:
            raise
        where = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        return _fail(f"{exc.strerror or exc}{':' if where else ''}{where}")
    except Exception as exc:  # a bug: still one line, with a way to see more
        if debug:
            raise
        return _fail(f"internal error ({type(exc).__name__}: {exc}); run with BEEWEAVE_DEBUG=1 for the traceback", 70)


def _entry() -> Any:  # pragma: no cover - python -m beeweave_core.cli
    sys.exit(main())


if __name__ == "__main__":
    _entry()

"""Command-line arguments must be UTF-8 text.

Python hands a program its arguments as ``str``; bytes that are not UTF-8 become lone
surrogates (PEP 383 ``surrogateescape``: byte 0xff becomes U+DCFF). Passed on, such a
value fails far from where it came from (the YAML parser blamed the built-in template)
or is written out as different bytes. trainctl refuses it before anything else runs,
naming the option the value belongs to, so every value either survives byte for byte
or is rejected.
"""

from __future__ import annotations

import os
import re

from trainctl.errors import UserError

ESCAPED_BYTE = "[\udc80-\udcff]"  # what os.fsdecode makes of a byte that is no UTF-8 (compiled on first use)


def check_utf8(args: list[str]) -> None:
    """One-line UserError for the first argument holding bytes that are not UTF-8."""
    for index, arg in enumerate(args):
        bad = None if arg.isascii() else re.search(ESCAPED_BYTE, arg)
        if bad:
            raw = os.fsencode(arg)
            offset = len(os.fsencode(arg[:bad.start()]))
            raise UserError(f"{owner_of(args, index)}: {raw!r} is not valid UTF-8 (byte 0x{raw[offset]:02x} "
                            f"at offset {offset}): pass the value as UTF-8 text")


def owner_of(args: list[str], index: int) -> str:
    """The option (or command word) that ``args[index]`` is the value of, as the user wrote it."""
    arg = args[index]
    if "--" in args[:index]:
        return f"argument {index - args.index('--')} of the command after --"
    if arg.startswith("-") and "=" in arg:
        return arg.partition("=")[0]
    if index > 0 and args[index - 1].startswith("-") and len(args[index - 1]) > 1:
        return args[index - 1]
    return f"argument {index + 1}"

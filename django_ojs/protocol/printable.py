"""Text a client wrote, made safe to print: in the server's log, in an operator's terminal.

Pure: no Django.
"""

from __future__ import annotations


def one_line(text: str) -> str:
    """``text`` with what is not printable escaped as Python writes it (``\\n``, ``\\x1b``, ``\\u202e``).

    Line breaks, escape sequences and bidi controls among them: a client's error
    (``"oops\\n2026-… CRITICAL …"``) must not write lines of its own into a log, nor a
    worker's hostname (``"h\\x1b]0;…\\x07"``) run in the terminal that prints it.
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)

"""The commands of the README's indented code blocks, as a reader would type them."""
import re
import shlex
from pathlib import Path


def readme_commands(readme: Path) -> list[str]:
    """Every command in the README's indented (4-space) code blocks: continuation lines joined,
    comments dropped, `a && b` split into a and b, whitespace collapsed."""
    commands, block, previous_blank = [], [], True
    lines = readme.read_text().splitlines() + [""]
    for line in lines:
        if line.startswith("    ") and (block or previous_blank):
            block.append(line.strip())
        elif block and line.strip():
            block = []  # an indented paragraph continuation, not code
        elif block:
            commands += _commands_of(block)
            block = []
        previous_blank = not line.strip()
    return commands


def _commands_of(block: list[str]) -> list[str]:
    text = re.sub(r"\\\n\s*", " ", "\n".join(block))
    found = []
    for line in filter(None, map(_without_comment, text.splitlines())):
        found += [" ".join(part.split()) for part in line.split(" && ")]
    return found


def _without_comment(line: str) -> str:
    """`line` up to where the shell starts a comment: a ` #` outside quotes."""
    for at in (m.start() for m in re.finditer(r"\s#", line)):
        try:
            shlex.split(line[:at])
        except ValueError:  # inside a quoted string
            continue
        return line[:at].strip()
    return line.strip()

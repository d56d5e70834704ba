"""The project's own error: one line for the user, naming the file, the line and the field."""

from __future__ import annotations


class SpecError(ValueError):
    """Bad input. ``str(err)`` is the one line the CLI prints (``file:line: field: message``)."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        self.message = message
        self.path = path
        self.line = line
        self.field = field
        super().__init__(self.format())

    def format(self) -> str:
        where = self.path or "<spec>"
        if self.line is not None:
            where += f":{self.line}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class ConfigError:
    """One problem in a configuration file, at a 1-based line."""

    line: int
    message: str

    def format(self, source: str) -> str:
        return f"{source}:{self.line}: {self.message}"


class ConfigInvalid(Exception):
    """The file cannot be applied; ``errors`` lists every problem found, by line."""

    def __init__(self, errors: list[ConfigError]) -> None:
        self.errors = sorted(errors)
        super().__init__("; ".join(f"line {e.line}: {e.message}" for e in self.errors))

    def format(self, source: str) -> list[str]:
        return [error.format(source) for error in self.errors]


class ConfigApplyError(Exception):
    """Applying a valid file failed part-way; the transaction was rolled back."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        self.line = line
        self.message = message
        super().__init__(message)

    def format(self, source: str) -> str:
        return f"{source}:{self.line}: {self.message}" if self.line else f"{source}: {self.message}"

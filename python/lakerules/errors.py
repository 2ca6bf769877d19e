"""Errors lakerules raises. Each names the problem and, where there is one, the fix."""


class LakeError(Exception):
    """A statement on a lake table cannot be done as asked. Nothing was committed."""


class NotSupported(LakeError):
    """The statement is valid Spark SQL, but lakerules does not support it (yet)."""


class CatalogError(LakeError):
    """A catalog operation failed; ``kind`` is the Spark exception the shim raises for it."""

    def __init__(self, kind: str, message: str, namespace=(), name: str = ""):
        super().__init__(message)
        self.kind = kind
        self.namespace = tuple(namespace)
        self.name = name


class ConflictError(LakeError):
    """Another commit changed what a statement read in a way its own commit cannot go over
    (a data file it deletes from was removed, or rows it should have seen were added)."""


class LakeSyntaxError(LakeError):
    """A statement lakerules parses has a syntax error: ``near`` the text at 1-based ``line`` and
    ``column`` ('' when the statement ends too early); Spark reports it as its own ParseException."""

    def __init__(self, message: str, sql: str, line: int, column: int, near: str, hint: str):
        super().__init__(message)
        self.sql, self.line, self.column, self.near, self.hint = sql, line, column, near, hint


class TooComplex(LakeError):
    """A statement lakerules parses nests deeper than it parses (``limit`` brackets); Spark reports
    it as its own ParseException FAILED_TO_PARSE_TOO_COMPLEX, as for its own statements."""

    def __init__(self, sql: str, limit: int):
        super().__init__(f"lakerules: [FAILED_TO_PARSE_TOO_COMPLEX] the statement was too complex to parse (nested "
                         f"more than {limit} deep); divide it into less complex parts")
        self.sql, self.limit = sql, limit


class CommitRejected(ConflictError):
    """The catalog refused the commit (pyiceberg's retries included): nothing was committed, and the
    statement's new files were deleted."""


class MaintenanceRace(CommitRejected):
    """While the statement ran, other commits landed and maintenance (expire_snapshots, another
    engine's cleanup) removed files of the snapshot the statement had read: the table is healthy;
    nothing was committed, and running the statement again reads the table as it is now
    (lakerules.execute.run does, a few times)."""


class CommitOutcomeUnknown(LakeError):
    """The commit failed with an error that does not say whether it landed (a catalog that timed
    out, a lost response). The statement's new files are kept, since the table may reference them;
    if it does not, CALL <catalog>.system.remove_orphan_files removes them."""


class UnreadableFile(LakeError):
    """A file a table's metadata names, or the metadata file itself, is missing or cannot be read
    as what it should be (truncated, overwritten, not Avro or JSON). Raised while the statement
    reads it, before anything is committed: the table is unchanged. ``kind`` says which file it
    is ('metadata file', 'manifest list', 'manifest'); ``table`` is the table's name when known."""

    def __init__(self, kind: str, path: str, cause: BaseException):
        super().__init__(kind, path)
        self.kind, self.path, self.cause = kind, path, cause
        self.table: str | None = None

    @property
    def missing(self) -> bool:
        return isinstance(self.cause, FileNotFoundError)

    def __str__(self) -> str:
        whose = f"table {self.table}: its " if self.table else ""
        if self.missing:
            problem = f"{whose}{self.kind} {self.path} is missing"
        else:
            problem = (f"{whose}{self.kind} {self.path} cannot be read ({_detail(self.cause)}): the file is "
                       f"damaged (truncated or overwritten) or is not a {self.kind}")
        if self.kind == "metadata file":
            fix = ("The catalog points the table at this file. Restore it, or register the table again with "
                   "an earlier metadata file of its metadata/ folder; DROP TABLE still removes the table "
                   "from the catalog.")
        else:
            fix = ("Restore the file, or roll the table back to a snapshot that does not use it; the files "
                   "it lists are not known without it.")
        return f"lakerules: {problem}. Nothing was changed. {fix}"


class MissingFile(UnreadableFile, FileNotFoundError):
    """An UnreadableFile that is not there: also a FileNotFoundError, as the error it replaces
    (code that reads tables with pyiceberg in the same process may catch that)."""


def unreadable(kind: str, path: str, cause: BaseException) -> UnreadableFile:
    """The UnreadableFile for cause, raised while reading the file at path."""
    if isinstance(cause, FileNotFoundError):
        e = MissingFile(kind, path, cause)
        e.errno, e.strerror, e.filename = cause.errno, cause.strerror or "No such file or directory", path
        return e
    return UnreadableFile(kind, path, cause)


def _detail(e: BaseException) -> str:
    """An error's first line, short, without the input a parser echoes."""
    errors = getattr(e, "errors", None)
    if callable(errors) and type(e).__name__ == "ValidationError":  # pydantic: say what, not the input
        try:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            return f"{first.get('msg', type(e).__name__)}{' at ' + where if where else ''}"
        except Exception:  # noqa: BLE001 - fall back to the text
            pass
    text = str(e).strip()
    line = text.splitlines()[0] if text else ""
    if len(line) > 200:
        line = line[:200] + "..."
    return f"{type(e).__name__}: {line}" if line else type(e).__name__


class CatalogUnavailable(LakeError):
    """The catalog's database refused or failed an operation (not writable, not readable, full).
    For a commit, ``landed`` is False when the catalog was read back and the commit is known not
    to have landed, None when that is not known."""

    def __init__(self, message: str, landed: bool | None = None):
        super().__init__(message)
        self.landed = landed

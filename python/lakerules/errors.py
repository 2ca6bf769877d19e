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


class CommitRejected(ConflictError):
    """The catalog refused the commit (pyiceberg's retries included): nothing was committed, and the
    statement's new files were deleted."""


class CommitOutcomeUnknown(LakeError):
    """The commit failed with an error that does not say whether it landed (a catalog that timed
    out, a lost response). The statement's new files are kept, since the table may reference them;
    if it does not, CALL <catalog>.system.remove_orphan_files removes them."""

"""The package's one exception, carrying the project's exit codes (sysexits:
64 usage, 65 bad data or checkpoint, 66 missing input, 74 I/O error), so a
trainer can `sys.exit(e.exit_code)`."""

EX_USAGE = 64
EX_DATAERR = 65
EX_NOINPUT = 66
EX_IOERR = 74


class CheckpointError(Exception):
    def __init__(self, exit_code, message):
        super().__init__(message)
        self.exit_code = exit_code

"""Exceptions of the graphnode client.

Every exception the package raises on purpose is a LoaderError (itself a
RuntimeError), so ``except graphnode.LoaderError`` catches a failed
sampler, a dead producer, a corrupt record and a refused request alike.
Messages start with the module that raised them ("ring:", "batch:",
"loader:", "control:") and name the ring file, sub-ring, worker, field or
byte offset at fault, like the Go packages' errors.
"""


class LoaderError(RuntimeError):
    """A loader cannot deliver its next batch: a sampler failed (error
    record) or died, the node stopped the stream, or the records on the
    ring are not in the promised order."""


class CorruptError(LoaderError):
    """Bytes of a ring file or a batch record are not valid (the Go
    packages' shm.ErrCorrupt and sample.ErrCorrupt)."""


class VersionError(CorruptError):
    """A ring file or record has a major version this client does not
    read (shm.ErrVersion, sample.ErrVersion)."""


class ProducerDeadError(LoaderError):
    """The producer (sampler) of a sub-ring died with no record pending
    (shm.ErrProducerDead). ``sub_ring`` and ``pid`` say which."""

    def __init__(self, message, sub_ring=-1, pid=0):
        super().__init__(message)
        self.sub_ring = sub_ring
        self.pid = pid


class EndOfStream(LoaderError):
    """A producer closed its sub-ring (state closed, every record read):
    the Go consumer's io.EOF. The loader turns an unexpected one into a
    LoaderError that says the node stopped the stream."""


class ControlError(LoaderError):
    """The node answered a control request with an error. ``key`` names
    the request field at fault ("" when none does); ``kv_code`` is the
    parameter server's code of the error (0 when it is not one): 10 for a
    kv.create whose spec differs from the existing table's, 1 for an
    unknown table (docs/control.md lists them)."""

    def __init__(self, message, key="", kv_code=0):
        text = "control: %s: %s" % (key, message) if key else "control: %s" % message
        super().__init__(text)
        self.msg = message
        self.key = key
        self.kv_code = kv_code
